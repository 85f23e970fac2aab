//! Certificate authorities and the leaf certificates they issue.

use std::net::IpAddr;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, ExtendedKeyUsagePurpose,
    IsCa, KeyPair, KeyUsagePurpose, SanType,
};
use time::{Duration, OffsetDateTime};

use crate::{Error, KeyedCert, Result};

/// How long a CA certificate is valid (kubeadm: ten years).
const CA_VALIDITY: Duration = Duration::days(3650);
/// How long a leaf certificate is valid (kubeadm: one year).
const LEAF_VALIDITY: Duration = Duration::days(365);
/// How far `notBefore` lies in the past, so a clock slightly behind still accepts new certificates.
const BACKDATE: Duration = Duration::hours(1);

/// The most groups (`O=`) a client certificate can carry. rcgen keys a distinguished name by
/// attribute type, so a second `O` needs a custom attribute type with the same OID (rcgen#81); there
/// is no third key for the same OID.
pub const MAX_GROUPS: usize = 2;

/// OID of the X.520 `organizationName` attribute (`O=`), which Kubernetes reads as a group.
const ORGANIZATION_NAME_OID: [u64; 4] = [2, 5, 4, 10];

/// A self-signed certificate authority (ECDSA P-256, ten years) that issues serving and client
/// certificates.
///
/// [`crate::Pki`] holds the cluster CA and the front-proxy CA; tests create unrelated ones with
/// [`CertificateAuthority::new_self_signed`] to present certificates no server trusts.
pub struct CertificateAuthority {
    issuer: CertifiedIssuer<'static, KeyPair>,
    keyed: KeyedCert,
}

impl std::fmt::Debug for CertificateAuthority {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CertificateAuthority")
            .field("cert", &self.keyed)
            .finish_non_exhaustive()
    }
}

impl CertificateAuthority {
    /// Creates a CA named `common_name` (key usages keyCertSign, cRLSign, digitalSignature).
    pub fn new_self_signed(common_name: &str) -> Result<Self> {
        let mut params = CertificateParams::default();
        params.distinguished_name = subject(common_name, &[])?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        set_validity(&mut params, CA_VALIDITY);
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let keyed = KeyedCert::new(issuer.as_ref(), issuer.key());
        Ok(Self { issuer, keyed })
    }

    /// The CA certificate and its key (`ca.crt`/`ca.key`).
    pub fn cert(&self) -> &KeyedCert {
        &self.keyed
    }

    /// Issues a serving certificate (EKU serverAuth, one year) for `ips` and `dns_names`.
    /// rustls verifies a server only against these SANs, never against `common_name`.
    pub fn issue_serving_cert(
        &self,
        common_name: &str,
        ips: &[IpAddr],
        dns_names: &[String],
    ) -> Result<KeyedCert> {
        let mut params = leaf_params(subject(common_name, &[])?, ExtendedKeyUsagePurpose::ServerAuth);
        params
            .subject_alt_names
            .extend(ips.iter().map(|ip| SanType::IpAddress(*ip)));
        for name in dns_names {
            let name = name
                .as_str()
                .try_into()
                .map_err(|_| Error::InvalidServerSpec(format!("DNS name {name:?} is not ASCII")))?;
            params.subject_alt_names.push(SanType::DnsName(name));
        }
        self.sign(params)
    }

    /// Issues a client certificate (EKU clientAuth, one year) for the Kubernetes user `common_name`
    /// in `groups` (each an `O=`; at most [`MAX_GROUPS`]).
    pub fn issue_client_cert(&self, common_name: &str, groups: &[&str]) -> Result<KeyedCert> {
        self.sign(leaf_params(
            subject(common_name, groups)?,
            ExtendedKeyUsagePurpose::ClientAuth,
        ))
    }

    fn sign(&self, params: CertificateParams) -> Result<KeyedCert> {
        let key = KeyPair::generate()?;
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(KeyedCert::new(&cert, &key))
    }
}

/// The subject `O=<group>... CN=<common_name>`, in the order kubeadm writes it. rcgen's default
/// subject (`CN=rcgen self signed cert`) is replaced, never extended.
fn subject(common_name: &str, groups: &[&str]) -> Result<DistinguishedName> {
    if groups.len() > MAX_GROUPS {
        return Err(Error::TooManyGroups {
            count: groups.len(),
            max: MAX_GROUPS,
        });
    }
    let group_types = [
        DnType::OrganizationName,
        DnType::CustomDnType(ORGANIZATION_NAME_OID.to_vec()),
    ];
    let mut name = DistinguishedName::new();
    for (ty, group) in group_types.into_iter().zip(groups) {
        name.push(ty, *group);
    }
    name.push(DnType::CommonName, common_name);
    Ok(name)
}

fn leaf_params(subject: DistinguishedName, usage: ExtendedKeyUsagePurpose) -> CertificateParams {
    let mut params = CertificateParams::default();
    params.distinguished_name = subject;
    params.use_authority_key_identifier_extension = true;
    params.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    params.extended_key_usages = vec![usage];
    set_validity(&mut params, LEAF_VALIDITY);
    params
}

fn set_validity(params: &mut CertificateParams, lifetime: Duration) {
    let now = OffsetDateTime::now_utc();
    params.not_before = now - BACKDATE;
    params.not_after = now + lifetime;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subject_replaces_rcgen_default_and_orders_groups_before_cn() {
        let name = subject("alice", &["devs", "ops"]).unwrap();
        let entries: Vec<_> = name.iter().map(|(ty, _)| ty.clone()).collect();
        assert_eq!(
            entries,
            [
                DnType::OrganizationName,
                DnType::CustomDnType(ORGANIZATION_NAME_OID.to_vec()),
                DnType::CommonName
            ]
        );
    }

    #[test]
    fn more_groups_than_rcgen_can_encode_are_rejected() {
        let err = subject("alice", &["a", "b", "c"]).unwrap_err();
        assert!(matches!(err, Error::TooManyGroups { count: 3, max: 2 }), "{err}");
    }
}
