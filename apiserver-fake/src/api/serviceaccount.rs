//! ServiceAccount tokens: `TokenRequest` (`serviceaccounts/token`), their verification for
//! authentication, and `TokenReview`.
//!
//! Tokens are JWTs as kube-apiserver's `serviceaccount.JWTTokenGenerator` writes them: signed with
//! `--service-account-signing-key-file` (RS256 for an RSA key, ES256/ES384 for an ECDSA one, the
//! header's `kid` the base64url SHA-256 of the PKIX public key), claims `aud`, `exp`, `iat`, `iss`
//! (the first `--service-account-issuer`), `jti` (1.30+), `nbf`, `sub`
//! (`system:serviceaccount:NS:NAME`) and the private `kubernetes.io` claim (namespace, serviceaccount
//! name and uid, the bound pod or secret, the pod's node). Verification (`serviceaccount.JWTTokenAuthenticator`)
//! accepts a token signed by any `--service-account-key-file` key (and the signing key), issued by
//! any `--service-account-issuer`, for one of the audiences asked for (`--api-audiences`, by default
//! the issuer), not expired, whose ServiceAccount (and bound object) still exists with the uid the token
//! names.
//!
//! kube-apiserver refuses to start without an issuer and a signing key; the fake starts anyway and then
//! signs with a key of its own made at start-up (so its tokens are valid on that server only).

use std::path::{Path, PathBuf};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use axum::body::Body;
use axum::response::{IntoResponse, Response};
use http::StatusCode;
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use mvp_core::UserInfo;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use sha2::Digest as _;

use crate::api::catalog::KubeVersion;
use crate::api::rest::object::meta_str;
use crate::api::rest::{RestRequest, read_body};
use crate::api::status::{GroupKind, Status, StatusCause};
use crate::store::{ObjectKey, StorageResource, Store, StoreError};

/// The default audience and issuer of kubeadm clusters (`https://kubernetes.default.svc.cluster.local`).
pub const DEFAULT_ISSUER: &str = "https://kubernetes.default.svc.cluster.local";
/// `TokenRequestSpec.expirationSeconds` when none is asked for (one hour).
pub const DEFAULT_EXPIRATION_SECONDS: i64 = 60 * 60;
/// The shortest token a TokenRequest may ask for (ten minutes).
pub const MIN_EXPIRATION_SECONDS: i64 = 10 * 60;
/// The longest token a TokenRequest may ask for (2^32 seconds).
pub const MAX_EXPIRATION_SECONDS: i64 = 1 << 32;
/// How far clocks may disagree on `exp`/`nbf`/`iat` (go-jose's default leeway).
const LEEWAY_SECONDS: u64 = 60;

/// kube-apiserver's service-account flags.
#[derive(Debug, Clone, Default)]
pub struct ServiceAccountOptions {
    /// `--service-account-issuer` (repeatable; the first issues, all are accepted).
    pub issuers: Vec<String>,
    /// `--service-account-key-file` (repeatable): PEM files of public or private keys that verify tokens.
    pub key_files: Vec<PathBuf>,
    /// `--service-account-signing-key-file`: the PEM private key that signs tokens.
    pub signing_key_file: Option<PathBuf>,
    /// `--api-audiences` (default: the issuers).
    pub api_audiences: Vec<String>,
    /// `--service-account-max-token-expiration` (none: no cap).
    pub max_expiration: Option<Duration>,
}

/// Why the service-account keys could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ServiceAccountKeyError {
    /// A key file could not be read.
    #[error("failed to read {path}")]
    Read {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
    /// A key file holds no usable key.
    #[error("failed to parse key file {path}: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// A key could not be generated.
    #[error("failed to generate a service account key: {0}")]
    Generate(String),
}

struct VerifyingKey {
    key: DecodingKey,
    algorithm: Algorithm,
}

/// The keys, issuers and audiences of one server's ServiceAccount tokens.
pub struct ServiceAccountTokens {
    issuers: Vec<String>,
    api_audiences: Vec<String>,
    max_expiration: Option<Duration>,
    signing: EncodingKey,
    algorithm: Algorithm,
    key_id: Option<String>,
    verifying: Vec<VerifyingKey>,
    binary_version: KubeVersion,
}

impl std::fmt::Debug for ServiceAccountTokens {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ServiceAccountTokens")
            .field("issuers", &self.issuers)
            .field("api_audiences", &self.api_audiences)
            .field("algorithm", &self.algorithm)
            .field("key_id", &self.key_id)
            .field("verifying_keys", &self.verifying.len())
            .finish_non_exhaustive()
    }
}

fn algorithm_of(key: &certs::ServiceAccountKey) -> Option<Algorithm> {
    Some(match key.algorithm()? {
        certs::TokenAlgorithm::Rs256 => Algorithm::RS256,
        certs::TokenAlgorithm::Es256 => Algorithm::ES256,
        certs::TokenAlgorithm::Es384 => Algorithm::ES384,
    })
}

fn encoding_key(pem: &str, algorithm: Algorithm) -> Result<EncodingKey, String> {
    match algorithm {
        Algorithm::RS256 => EncodingKey::from_rsa_pem(pem.as_bytes()),
        _ => EncodingKey::from_ec_pem(pem.as_bytes()),
    }
    .map_err(|e| e.to_string())
}

fn decoding_key(public_pem: &str, algorithm: Algorithm) -> Result<DecodingKey, String> {
    match algorithm {
        Algorithm::RS256 => DecodingKey::from_rsa_pem(public_pem.as_bytes()),
        _ => DecodingKey::from_ec_pem(public_pem.as_bytes()),
    }
    .map_err(|e| e.to_string())
}

/// kube-apiserver's `keyIDFromPublicKey`: base64url (no padding) of the SHA-256 of the PKIX DER.
fn key_id(public_der: &[u8]) -> String {
    data_encoding::BASE64URL_NOPAD.encode(&sha2::Sha256::digest(public_der))
}

/// The verifying keys of one `--service-account-key-file`: each private key's public half, each
/// `PUBLIC KEY` (RSA or ECDSA) as is.
fn read_verifying_keys(path: &Path) -> Result<Vec<VerifyingKey>, ServiceAccountKeyError> {
    let text = std::fs::read_to_string(path).map_err(|source| ServiceAccountKeyError::Read {
        path: path.to_owned(),
        source,
    })?;
    let parse = |reason: String| ServiceAccountKeyError::Parse {
        path: path.to_owned(),
        reason,
    };
    let mut keys = Vec::new();
    for block in pem_blocks(&text) {
        if block.contains("PRIVATE KEY-----") {
            let key = certs::ServiceAccountKey::from_pem(&block).map_err(|e| parse(e.to_string()))?;
            let algorithm = algorithm_of(&key).ok_or_else(|| parse("unsupported key type".to_owned()))?;
            keys.push(VerifyingKey {
                key: decoding_key(&key.public_key_pem(), algorithm).map_err(parse)?,
                algorithm,
            });
        } else if block.contains("BEGIN PUBLIC KEY-----") || block.contains("BEGIN RSA PUBLIC KEY-----") {
            let (key, algorithm) = match DecodingKey::from_ec_pem(block.as_bytes()) {
                Ok(key) => (key, ec_algorithm_of_public(&block)),
                Err(_) => (
                    DecodingKey::from_rsa_pem(block.as_bytes()).map_err(|e| parse(e.to_string()))?,
                    Algorithm::RS256,
                ),
            };
            keys.push(VerifyingKey { key, algorithm });
        }
    }
    if keys.is_empty() {
        return Err(parse(
            "data does not contain any valid RSA or ECDSA public keys".to_owned(),
        ));
    }
    Ok(keys)
}

/// P-384 public keys are longer than P-256 ones (a 97-byte point against 65).
fn ec_algorithm_of_public(pem: &str) -> Algorithm {
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).collect();
    match data_encoding::BASE64.decode(body.as_bytes()) {
        Ok(der) if der.len() > 100 => Algorithm::ES384,
        _ => Algorithm::ES256,
    }
}

/// The PEM blocks of a file, each with its BEGIN and END lines.
fn pem_blocks(text: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in text.lines() {
        let line = line.trim();
        if line.starts_with("-----BEGIN ") {
            current = Some(format!("{line}\n"));
        } else if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
            if line.starts_with("-----END ") {
                blocks.extend(current.take());
            }
        }
    }
    blocks
}

/// A reference to an object in the `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct ObjectRef {
    /// Its name.
    pub name: String,
    /// Its uid.
    pub uid: String,
}

/// The private `kubernetes.io` claim.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, Default)]
pub struct KubernetesClaim {
    /// The ServiceAccount's namespace.
    pub namespace: String,
    /// The node of the bound pod (or the bound node).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node: Option<ObjectRef>,
    /// The bound pod.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pod: Option<ObjectRef>,
    /// The bound secret.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub secret: Option<ObjectRef>,
    /// The ServiceAccount.
    pub serviceaccount: ObjectRef,
}

/// The claims of a ServiceAccount token, in the (sorted) order kube-apiserver's tokens have them.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Claims {
    /// Audiences.
    #[serde(deserialize_with = "one_or_many")]
    pub aud: Vec<String>,
    /// Expiry (Unix seconds).
    pub exp: i64,
    /// Issued at.
    pub iat: i64,
    /// Issuer.
    pub iss: String,
    /// Token ID (1.30+).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jti: Option<String>,
    /// The Kubernetes claims.
    #[serde(rename = "kubernetes.io")]
    pub kubernetes: KubernetesClaim,
    /// Not before.
    pub nbf: i64,
    /// `system:serviceaccount:NS:NAME`.
    pub sub: String,
}

fn one_or_many<'de, D: serde::Deserializer<'de>>(deserializer: D) -> Result<Vec<String>, D::Error> {
    #[derive(Deserialize)]
    #[serde(untagged)]
    enum OneOrMany {
        One(String),
        Many(Vec<String>),
    }
    Ok(match OneOrMany::deserialize(deserializer)? {
        OneOrMany::One(one) => vec![one],
        OneOrMany::Many(many) => many,
    })
}

fn unix_now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or_default()
}

fn rfc3339(seconds: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(seconds)
        .ok()
        .and_then(|t| t.format(&time::format_description::well_known::Rfc3339).ok())
        .unwrap_or_default()
}

fn service_accounts() -> StorageResource {
    StorageResource::new("", "serviceaccounts")
}

impl ServiceAccountTokens {
    /// Loads the keys the flags name; without a signing key, generates one (the fake's departure).
    pub fn new(
        options: &ServiceAccountOptions,
        binary_version: KubeVersion,
    ) -> Result<Self, ServiceAccountKeyError> {
        let signing = match &options.signing_key_file {
            Some(path) => {
                let pem = std::fs::read_to_string(path).map_err(|source| ServiceAccountKeyError::Read {
                    path: path.clone(),
                    source,
                })?;
                certs::ServiceAccountKey::from_pem(&pem).map_err(|e| ServiceAccountKeyError::Parse {
                    path: path.clone(),
                    reason: e.to_string(),
                })?
            }
            None => certs::ServiceAccountKey::generate()
                .map_err(|e| ServiceAccountKeyError::Generate(e.to_string()))?,
        };
        let parse = |reason: String| ServiceAccountKeyError::Parse {
            path: options.signing_key_file.clone().unwrap_or_default(),
            reason,
        };
        let algorithm = algorithm_of(&signing).ok_or_else(|| parse("unsupported key type".to_owned()))?;
        let mut verifying = vec![VerifyingKey {
            key: decoding_key(&signing.public_key_pem(), algorithm).map_err(parse)?,
            algorithm,
        }];
        for path in &options.key_files {
            verifying.extend(read_verifying_keys(path)?);
        }
        let issuers = if options.issuers.is_empty() {
            vec![DEFAULT_ISSUER.to_owned()]
        } else {
            options.issuers.clone()
        };
        let api_audiences = if options.api_audiences.is_empty() {
            issuers.clone()
        } else {
            options.api_audiences.clone()
        };
        Ok(Self {
            signing: encoding_key(signing.private_key_pem(), algorithm).map_err(parse)?,
            key_id: Some(key_id(&signing.public_key_der())),
            algorithm,
            verifying,
            issuers,
            api_audiences,
            max_expiration: options.max_expiration,
            binary_version,
        })
    }

    /// The audiences of the API (`--api-audiences`).
    pub fn api_audiences(&self) -> &[String] {
        &self.api_audiences
    }

    /// Signs `claims`.
    pub fn sign(&self, claims: &Claims) -> Result<String, Status> {
        let mut header = Header::new(self.algorithm);
        header.typ = None;
        header.kid = self.key_id.clone();
        jsonwebtoken::encode(&header, claims, &self.signing)
            .map_err(|e| Status::internal_error(&format!("failed to sign token: {e}")))
    }

    /// Checks the token's signature, issuer, audiences (one of `audiences`) and lifetime; the
    /// objects it names are checked by [`Self::authenticate`].
    pub fn verify(&self, token: &str, audiences: &[String]) -> Result<Claims, String> {
        let header = jsonwebtoken::decode_header(token).map_err(|e| e.to_string())?;
        let mut last_error = "invalid signature".to_owned();
        for key in self.verifying.iter().filter(|k| k.algorithm == header.alg) {
            let mut validation = Validation::new(key.algorithm);
            validation.leeway = LEEWAY_SECONDS;
            validation.validate_nbf = true;
            validation.set_issuer(&self.issuers);
            validation.set_audience(audiences);
            validation.set_required_spec_claims(&["exp", "iss", "sub", "aud"]);
            match jsonwebtoken::decode::<Claims>(token, &key.key, &validation) {
                Ok(data) => return Ok(data.claims),
                Err(e) => {
                    use jsonwebtoken::errors::ErrorKind;
                    last_error = match e.kind() {
                        ErrorKind::InvalidSignature => "invalid signature".to_owned(),
                        ErrorKind::ExpiredSignature => "service account token has expired".to_owned(),
                        ErrorKind::InvalidAudience => "token audiences is invalid".to_owned(),
                        ErrorKind::InvalidIssuer => "token issuer is invalid".to_owned(),
                        ErrorKind::ImmatureSignature => "service account token is not valid yet".to_owned(),
                        _ => e.to_string(),
                    };
                    if !matches!(e.kind(), ErrorKind::InvalidSignature) {
                        return Err(last_error);
                    }
                }
            }
        }
        Err(last_error)
    }

    /// The user a ServiceAccount token stands for, after [`Self::verify`] and the checks that its
    /// ServiceAccount (and bound pod or secret) still exist with the uids it names; `Err` with the
    /// reason otherwise. `Ok(None)`: not a JWT at all (another authenticator's token).
    pub async fn authenticate(
        &self,
        store: &dyn Store,
        token: &str,
        audiences: &[String],
    ) -> Result<Option<(UserInfo, Vec<String>)>, String> {
        if token.split('.').count() != 3 {
            return Ok(None);
        }
        let claims = self.verify(token, audiences)?;
        let k8s = &claims.kubernetes;
        let namespace = k8s.namespace.clone();
        let check = |what: &str, object: Result<Value, StoreError>, claimed: &ObjectRef| match object {
            Ok(object) if meta_str(&object, "uid") == claimed.uid => {
                if what == "pod" && object.pointer("/metadata/deletionTimestamp").is_some() {
                    return Err(format!("pod {:?} is being deleted", claimed.name));
                }
                Ok(())
            }
            Ok(object) => Err(format!(
                "{what} UID ({}) does not match claim ({})",
                meta_str(&object, "uid"),
                claimed.uid
            )),
            Err(StoreError::NotFound { .. }) => {
                Err(format!("{what} {}/{} not found", namespace, claimed.name))
            }
            Err(e) => Err(e.to_string()),
        };
        let key = |name: &str| ObjectKey::namespaced(&namespace, name);
        check(
            "service account",
            store
                .get(&service_accounts(), &key(&k8s.serviceaccount.name))
                .await,
            &k8s.serviceaccount,
        )?;
        if let Some(pod) = &k8s.pod {
            check(
                "pod",
                store
                    .get(&StorageResource::new("", "pods"), &key(&pod.name))
                    .await,
                pod,
            )?;
        }
        if let Some(secret) = &k8s.secret {
            check(
                "secret",
                store
                    .get(&StorageResource::new("", "secrets"), &key(&secret.name))
                    .await,
                secret,
            )?;
        }
        let mut user = UserInfo {
            name: claims.sub.clone(),
            uid: k8s.serviceaccount.uid.clone(),
            groups: vec![
                "system:serviceaccounts".to_owned(),
                format!("system:serviceaccounts:{namespace}"),
            ],
            ..Default::default()
        };
        if let Some(jti) = &claims.jti {
            user.extra.insert(
                "authentication.kubernetes.io/credential-id".to_owned(),
                vec![format!("JTI={jti}")],
            );
        }
        if let Some(pod) = &k8s.pod {
            user.extra.insert(
                "authentication.kubernetes.io/pod-name".to_owned(),
                vec![pod.name.clone()],
            );
            user.extra.insert(
                "authentication.kubernetes.io/pod-uid".to_owned(),
                vec![pod.uid.clone()],
            );
        }
        if let Some(node) = &k8s.node {
            user.extra.insert(
                "authentication.kubernetes.io/node-name".to_owned(),
                vec![node.name.clone()],
            );
            user.extra.insert(
                "authentication.kubernetes.io/node-uid".to_owned(),
                vec![node.uid.clone()],
            );
        }
        let matched = claims
            .aud
            .iter()
            .filter(|a| audiences.contains(a))
            .cloned()
            .collect();
        Ok(Some((user, matched)))
    }
}

/// `POST …/serviceaccounts/NAME/token`: a TokenRequest, answered with a signed token (201).
pub async fn token_request(
    tokens: &ServiceAccountTokens,
    req: &RestRequest<'_>,
    body: Body,
) -> Result<Response, Status> {
    let dry_run = req.query.dry_run()?;
    let body = read_body(body).await?;
    let request = crate::api::rest::negotiation::decode_body(&req.headers, &body, false)?;
    let kind = GroupKind::new("authentication.k8s.io", "TokenRequest");
    let named = meta_str(&request, "name");
    let name = req.info.name.clone();
    if !named.is_empty() && named != name {
        return Err(Status::invalid(
            &kind,
            &name,
            vec![StatusCause::field_invalid(
                "metadata.name",
                named,
                "must match the service account name if specified",
            )],
        ));
    }
    // Upstream's create handler admits the TokenRequest (mutating, then validating admission) before
    // the registry validates it.
    let (request, warnings) =
        crate::api::rest::subresource::admit_action(req, request, "authentication.k8s.io/v1", "TokenRequest")
            .await?;
    let namespace = req.namespace.clone().unwrap_or_default();
    let spec = request.get("spec").cloned().unwrap_or_else(|| json!({}));
    let mut audiences: Vec<String> = spec
        .get("audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    if audiences.is_empty() {
        audiences = tokens.api_audiences.clone();
    }
    let requested = requested_expiration(&spec, &kind, &name)?;
    let store = req.ctx.store.as_ref();
    let account = store
        .get(&service_accounts(), &ObjectKey::namespaced(&namespace, &name))
        .await?;
    let mut claim = KubernetesClaim {
        namespace: namespace.clone(),
        serviceaccount: ObjectRef {
            name: name.clone(),
            uid: meta_str(&account, "uid").to_owned(),
        },
        ..Default::default()
    };
    let bound = spec.get("boundObjectRef").filter(|v| !v.is_null());
    if let Some(bound) = bound {
        bind_object(store, &namespace, &name, bound, &mut claim, tokens.binary_version).await?;
    }
    let mut expiration = requested;
    if let Some(max) = tokens.max_expiration {
        expiration = expiration.min(max.as_secs() as i64);
    }
    let now = unix_now();
    let claims = Claims {
        aud: audiences.clone(),
        exp: now + expiration,
        iat: now,
        iss: tokens.issuers[0].clone(),
        jti: (tokens.binary_version.minor >= 30).then(|| uuid::Uuid::new_v4().to_string()),
        kubernetes: claim,
        nbf: now,
        sub: format!("system:serviceaccount:{namespace}:{name}"),
    };
    let token = if dry_run {
        String::new()
    } else {
        tokens.sign(&claims)?
    };
    let spec_out = json!({
        "audiences": audiences,
        "expirationSeconds": requested,
        "boundObjectRef": bound.cloned().unwrap_or(Value::Null),
    });
    let response = json!({
        "kind": "TokenRequest",
        "apiVersion": "authentication.k8s.io/v1",
        "metadata": {"name": name, "namespace": namespace, "creationTimestamp": null},
        "spec": spec_out,
        "status": {"token": token, "expirationTimestamp": rfc3339(now + expiration)},
    });
    Ok(crate::api::rest::write::with_warnings(
        req.respond(StatusCode::CREATED, &response),
        &warnings,
    ))
}

/// `spec.expirationSeconds` of a TokenRequest (the default when absent), refused with upstream's
/// `ValidateTokenRequest` errors when under 10 minutes or over 2^32 seconds.
fn requested_expiration(spec: &Value, kind: &GroupKind, name: &str) -> Result<i64, Status> {
    let requested = match spec.get("expirationSeconds") {
        None | Some(Value::Null) => DEFAULT_EXPIRATION_SECONDS,
        Some(value) => value
            .as_i64()
            .ok_or_else(|| Status::bad_request("spec.expirationSeconds: must be an integer"))?,
    };
    let mut causes = Vec::new();
    if requested < MIN_EXPIRATION_SECONDS {
        causes.push(StatusCause {
            reason: "FieldValueInvalid".to_owned(),
            message: format!("Invalid value: {requested}: may not specify a duration less than 10 minutes"),
            field: "spec.expirationSeconds".to_owned(),
        });
    }
    if requested > MAX_EXPIRATION_SECONDS {
        causes.push(StatusCause {
            reason: "FieldValueTooLong".to_owned(),
            message: "Too long: may not specify a duration larger than 2^32 seconds".to_owned(),
            field: "spec.expirationSeconds".to_owned(),
        });
    }
    if causes.is_empty() {
        Ok(requested)
    } else {
        Err(Status::invalid(kind, name, causes))
    }
}

/// Adds the bound object of a TokenRequest to the claim (`boundObjectRef`: a Pod or Secret of the
/// namespace, 1.32+ also a Node), as upstream's TokenREST checks it.
async fn bind_object(
    store: &dyn Store,
    namespace: &str,
    account: &str,
    bound: &Value,
    claim: &mut KubernetesClaim,
    version: KubeVersion,
) -> Result<(), Status> {
    let kind = bound.get("kind").and_then(Value::as_str).unwrap_or_default();
    let api_version = bound
        .get("apiVersion")
        .and_then(Value::as_str)
        .unwrap_or_default();
    let name = bound.get("name").and_then(Value::as_str).unwrap_or_default();
    let uid = bound.get("uid").and_then(Value::as_str).unwrap_or_default();
    let resource = match (api_version, kind) {
        ("v1", "Pod") => "pods",
        ("v1", "Secret") => "secrets",
        ("v1", "Node") if version.minor >= 32 => "nodes",
        _ => {
            return Err(Status::bad_request(format!(
                "cannot bind token for object of kind {kind:?}: only Pod and Secret are supported"
            )));
        }
    };
    let key = if resource == "nodes" {
        ObjectKey::cluster(name)
    } else {
        ObjectKey::namespaced(namespace, name)
    };
    let object = store.get(&StorageResource::new("", resource), &key).await?;
    let actual_uid = meta_str(&object, "uid").to_owned();
    if !uid.is_empty() && uid != actual_uid {
        // Upstream names the kind where a resource would be (`GroupResource{Resource: gvk.Kind}`).
        return Err(Status::conflict_with(
            &crate::store::GroupResource::new("", kind),
            name,
            &format!(
                "the UID in the bound object reference ({uid}) does not match the UID in record. The object might have been deleted and then recreated"
            ),
        ));
    }
    let reference = ObjectRef {
        name: name.to_owned(),
        uid: actual_uid,
    };
    match resource {
        "pods" => {
            let pod_account = object
                .pointer("/spec/serviceAccountName")
                .and_then(Value::as_str)
                .unwrap_or("default");
            if pod_account != account {
                return Err(Status::bad_request(format!(
                    "cannot bind token for serviceaccount {account:?} to pod running with different serviceaccount name."
                )));
            }
            if let Some(node) = object.pointer("/spec/nodeName").and_then(Value::as_str)
                && version.minor >= 30
                && let Ok(node_object) = store
                    .get(&StorageResource::new("", "nodes"), &ObjectKey::cluster(node))
                    .await
            {
                claim.node = Some(ObjectRef {
                    name: node.to_owned(),
                    uid: meta_str(&node_object, "uid").to_owned(),
                });
            }
            claim.pod = Some(reference);
        }
        "secrets" => claim.secret = Some(reference),
        _ => claim.node = Some(reference),
    }
    Ok(())
}

/// Whether the request is `create tokenreviews` in `authentication.k8s.io`.
pub fn is_token_review(group: &str, resource: &str, verb: &str) -> bool {
    group == "authentication.k8s.io" && resource == "tokenreviews" && verb == "create"
}

/// `POST /apis/authentication.k8s.io/VERSION/tokenreviews`: whether a token authenticates, and as
/// whom (201; never stored, so no name is needed).
pub async fn token_review(
    tokens: &ServiceAccountTokens,
    store: &dyn Store,
    static_tokens: &(dyn Fn(&str) -> Option<UserInfo> + Sync),
    version: &str,
    body: &[u8],
) -> Response {
    let review: Value = match serde_json::from_slice(body) {
        Ok(review) => review,
        Err(e) => {
            return Status::bad_request(format!("couldn't get version/kind; json parse error: {e}"))
                .into_response();
        }
    };
    let token = review
        .pointer("/spec/token")
        .and_then(Value::as_str)
        .unwrap_or_default();
    if token.is_empty() {
        return Status::bad_request("token is required for TokenReview in authentication").into_response();
    }
    let requested: Vec<String> = review
        .pointer("/spec/audiences")
        .and_then(Value::as_array)
        .map(|a| a.iter().filter_map(Value::as_str).map(str::to_owned).collect())
        .unwrap_or_default();
    let audiences = if requested.is_empty() {
        tokens.api_audiences.clone()
    } else {
        requested.clone()
    };
    let outcome = match static_tokens(token) {
        Some(user) => Ok((user, audiences.clone())),
        None => match tokens.authenticate(store, token, &audiences).await {
            Ok(Some(found)) => Ok(found),
            Ok(None) => Err("invalid bearer token".to_owned()),
            Err(reason) => Err(format!("[invalid bearer token, {reason}]")),
        },
    };
    let mut status = json!({});
    match outcome {
        Ok((mut user, matched)) => {
            if !user.groups.iter().any(|g| g == super::AUTHENTICATED_GROUP) {
                user.groups.push(super::AUTHENTICATED_GROUP.to_owned());
            }
            let mut user_info = json!({"username": user.name});
            if !user.uid.is_empty() {
                user_info["uid"] = json!(user.uid);
            }
            user_info["groups"] = json!(user.groups);
            if !user.extra.is_empty() {
                user_info["extra"] = json!(user.extra);
            }
            status["authenticated"] = json!(true);
            status["user"] = user_info;
            status["audiences"] = json!(matched);
        }
        Err(error) => {
            status["user"] = json!({});
            status["error"] = json!(error);
        }
    }
    let mut spec = json!({"token": token});
    if !requested.is_empty() {
        spec["audiences"] = json!(requested);
    }
    let metadata = {
        let mut metadata = review.get("metadata").cloned().unwrap_or_else(|| json!({}));
        if let Some(map) = metadata.as_object_mut() {
            map.entry("creationTimestamp").or_insert(Value::Null);
        }
        metadata
    };
    let body = json!({
        "kind": "TokenReview",
        "apiVersion": format!("authentication.k8s.io/{version}"),
        "metadata": metadata,
        "spec": spec,
        "status": status,
    });
    (StatusCode::CREATED, axum::Json(body)).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::store::MemoryStore;

    fn version() -> KubeVersion {
        KubeVersion { major: 1, minor: 36 }
    }

    /// A 2048-bit RSA key made for these tests only (`openssl genrsa -traditional 2048`): kubeadm's
    /// default `sa.key` is RSA, PKCS#1.
    const TEST_RSA_KEY: &str = include_str!("../../tests/fixtures/sa-rsa-test.key");

    async fn account(store: &MemoryStore, namespace: &str, name: &str) -> String {
        let created = store
            .create(
                &service_accounts(),
                &ObjectKey::namespaced(namespace, name),
                json!({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": name, "namespace": namespace}}),
            )
            .await
            .unwrap();
        meta_str(&created, "uid").to_owned()
    }

    fn claims(uid: &str, exp_in: i64) -> Claims {
        let now = unix_now();
        Claims {
            aud: vec![DEFAULT_ISSUER.to_owned()],
            exp: now + exp_in,
            iat: now,
            iss: DEFAULT_ISSUER.to_owned(),
            jti: Some("j".to_owned()),
            kubernetes: KubernetesClaim {
                namespace: "default".to_owned(),
                serviceaccount: ObjectRef {
                    name: "robot".to_owned(),
                    uid: uid.to_owned(),
                },
                ..Default::default()
            },
            nbf: now,
            sub: "system:serviceaccount:default:robot".to_owned(),
        }
    }

    #[tokio::test]
    async fn a_signed_token_authenticates_its_service_account_while_it_exists() {
        let store = MemoryStore::new();
        let uid = account(&store, "default", "robot").await;
        let tokens = ServiceAccountTokens::new(&ServiceAccountOptions::default(), version()).unwrap();
        let token = tokens.sign(&claims(&uid, 3600)).unwrap();
        let header = jsonwebtoken::decode_header(&token).unwrap();
        assert_eq!(header.alg, Algorithm::ES256);
        assert!(header.kid.is_some());
        let (user, audiences) = tokens
            .authenticate(&store, &token, tokens.api_audiences())
            .await
            .unwrap()
            .unwrap();
        assert_eq!(user.name, "system:serviceaccount:default:robot");
        assert_eq!(user.uid, uid);
        assert_eq!(
            user.groups,
            ["system:serviceaccounts", "system:serviceaccounts:default"]
        );
        assert_eq!(
            user.extra["authentication.kubernetes.io/credential-id"],
            ["JTI=j"]
        );
        assert_eq!(audiences, [DEFAULT_ISSUER]);

        // Wrong audience, expired, another uid, not a JWT.
        let other = ["https://elsewhere".to_owned()];
        assert_eq!(
            tokens.authenticate(&store, &token, &other).await.unwrap_err(),
            "token audiences is invalid"
        );
        let expired = tokens.sign(&claims(&uid, -3600)).unwrap();
        assert_eq!(
            tokens
                .authenticate(&store, &expired, tokens.api_audiences())
                .await
                .unwrap_err(),
            "service account token has expired"
        );
        let stale = tokens.sign(&claims("another-uid", 3600)).unwrap();
        assert_eq!(
            tokens
                .authenticate(&store, &stale, tokens.api_audiences())
                .await
                .unwrap_err(),
            format!("service account UID ({uid}) does not match claim (another-uid)")
        );
        assert!(
            tokens
                .authenticate(&store, "static-token", tokens.api_audiences())
                .await
                .unwrap()
                .is_none()
        );

        // Another server's key: the signature does not verify.
        let stranger = ServiceAccountTokens::new(&ServiceAccountOptions::default(), version()).unwrap();
        assert_eq!(
            stranger
                .authenticate(&store, &token, stranger.api_audiences())
                .await
                .unwrap_err(),
            "invalid signature"
        );
    }

    #[tokio::test]
    async fn rsa_keys_sign_rs256_and_verify_with_their_public_key_file() {
        let dir = tempfile::tempdir().unwrap();
        let key_path = dir.path().join("sa.key");
        std::fs::write(&key_path, TEST_RSA_KEY).unwrap();
        let key = certs::ServiceAccountKey::from_pem(TEST_RSA_KEY).unwrap();
        let pub_path = dir.path().join("sa.pub");
        std::fs::write(&pub_path, key.public_key_pem()).unwrap();

        let signer = ServiceAccountTokens::new(
            &ServiceAccountOptions {
                signing_key_file: Some(key_path),
                issuers: vec!["https://issuer.example".to_owned()],
                ..Default::default()
            },
            version(),
        )
        .unwrap();
        let mut claims = claims("u", 3600);
        claims.iss = "https://issuer.example".to_owned();
        claims.aud = vec!["https://issuer.example".to_owned()];
        let token = signer.sign(&claims).unwrap();
        assert_eq!(jsonwebtoken::decode_header(&token).unwrap().alg, Algorithm::RS256);

        // A server that only has the public key (and a signing key of its own) accepts it.
        let verifier = ServiceAccountTokens::new(
            &ServiceAccountOptions {
                key_files: vec![pub_path],
                issuers: vec![
                    "https://other.example".to_owned(),
                    "https://issuer.example".to_owned(),
                ],
                api_audiences: vec!["https://issuer.example".to_owned()],
                ..Default::default()
            },
            version(),
        )
        .unwrap();
        assert_eq!(verifier.verify(&token, verifier.api_audiences()).unwrap(), claims);
    }

    #[test]
    fn claims_serialize_in_upstreams_order() {
        let text = serde_json::to_string(&claims("u", 0)).unwrap();
        let keys: Vec<&str> = [
            "\"aud\"",
            "\"exp\"",
            "\"iat\"",
            "\"iss\"",
            "\"jti\"",
            "\"kubernetes.io\"",
            "\"nbf\"",
            "\"sub\"",
        ]
        .into_iter()
        .collect();
        let positions: Vec<usize> = keys.iter().map(|k| text.find(k).unwrap()).collect();
        assert!(positions.windows(2).all(|w| w[0] < w[1]), "{text}");
        // A single audience as a string reads back too.
        let mut value: Value = serde_json::from_str(&text).unwrap();
        value["aud"] = json!("one");
        let back: Claims = serde_json::from_value(value).unwrap();
        assert_eq!(back.aud, ["one"]);
    }
}
