//! Kubeconfig files for the admin user.

use data_encoding::BASE64;

/// A kubeconfig (YAML) for `server_url` with the given CA and client certificate embedded, as
/// `kubeadm` writes `admin.conf`. `name` names the cluster, user and context.
pub fn render(
    name: &str,
    server_url: &str,
    ca_pem: &str,
    client_cert_pem: &str,
    client_key_pem: &str,
) -> String {
    format!(
        "apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {ca}
    server: {server_url}
  name: {name}
contexts:
- context:
    cluster: {name}
    user: admin@{name}
  name: admin@{name}
current-context: admin@{name}
preferences: {{}}
users:
- name: admin@{name}
  user:
    client-certificate-data: {cert}
    client-key-data: {key}
",
        ca = BASE64.encode(ca_pem.as_bytes()),
        cert = BASE64.encode(client_cert_pem.as_bytes()),
        key = BASE64.encode(client_key_pem.as_bytes()),
    )
}
