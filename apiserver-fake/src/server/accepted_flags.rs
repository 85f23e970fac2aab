//! kube-apiserver flags the fake accepts without acting on them, so that a real command line (kubeadm's
//! static-pod manifest, above all) runs unchanged apart from its paths.
//!
//! Each flag keeps kube-apiserver's name and value syntax, and its help says why it changes nothing here:
//! what it configures does not exist in the fake (kubelets, privileged containers, TLS to etcd) or is
//! fixed (the admission chain). None of them silently means something else: a value the fake would
//! have to act on differently (an `https://` etcd server, say) is refused by the flag that acts on it.

use std::path::PathBuf;

use clap::Args;

/// kube-apiserver flags accepted and inert in the fake (see the module documentation).
#[derive(Debug, Clone, Default, Args)]
pub struct AcceptedFlags {
    /// If true, allow privileged containers. (Accepted, inert: the fake runs no containers and does not
    /// check `securityContext.privileged`.)
    #[arg(long, value_name = "true|false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub allow_privileged: Option<bool>,
    /// admission plugins that should be enabled in addition to default enabled ones. (Accepted, inert:
    /// the fake's admission is fixed, NamespaceLifecycle's checks and its defaulting.)
    #[arg(long, value_delimiter = ',', value_name = "strings")]
    pub enable_admission_plugins: Vec<String>,
    /// admission plugins that should be disabled although they are in the default enabled plugins list.
    /// (Accepted, inert, as --enable-admission-plugins.)
    #[arg(long, value_delimiter = ',', value_name = "strings")]
    pub disable_admission_plugins: Vec<String>,
    /// Enable to allow secrets of type 'bootstrap.kubernetes.io/token' in the 'kube-system' namespace to
    /// be used for TLS bootstrapping authentication. (Accepted, not implemented: a bootstrap token gets
    /// 401 from the fake.)
    #[arg(long, value_name = "true|false", num_args = 0..=1, require_equals = true,
          default_missing_value = "true", value_parser = clap::builder::BoolishValueParser::new())]
    pub enable_bootstrap_token_auth: Option<bool>,
    /// SSL Certificate Authority file used to secure etcd communication. (Accepted, inert: the fake
    /// talks to etcd over plain http:// only and refuses https:// servers.)
    #[arg(long, value_name = "path")]
    pub etcd_cafile: Option<PathBuf>,
    /// SSL certification file used to secure etcd communication. (Accepted, inert, as --etcd-cafile.)
    #[arg(long, value_name = "path")]
    pub etcd_certfile: Option<PathBuf>,
    /// SSL key file used to secure etcd communication. (Accepted, inert, as --etcd-cafile.)
    #[arg(long, value_name = "path")]
    pub etcd_keyfile: Option<PathBuf>,
    /// Path to a cert file for the certificate authority. (Accepted, inert: the fake has no kubelets to
    /// call.)
    #[arg(long, value_name = "path")]
    pub kubelet_certificate_authority: Option<PathBuf>,
    /// Path to a client cert file for TLS. (Accepted, inert: the fake has no kubelets to call.)
    #[arg(long, value_name = "path")]
    pub kubelet_client_certificate: Option<PathBuf>,
    /// Path to a client key file for TLS. (Accepted, inert: the fake has no kubelets to call.)
    #[arg(long, value_name = "path")]
    pub kubelet_client_key: Option<PathBuf>,
    /// List of the preferred NodeAddressTypes to use for kubelet connections. (Accepted, inert: the fake
    /// has no kubelets to call.)
    #[arg(long, value_delimiter = ',', value_name = "strings")]
    pub kubelet_preferred_address_types: Vec<String>,
    /// A port range to reserve for services with NodePort visibility. (Accepted, inert: the fake
    /// allocates no node ports.)
    #[arg(long, value_name = "portRange")]
    pub service_node_port_range: Option<String>,
}
