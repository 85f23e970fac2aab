//! Kubeconfig files with embedded credentials, shaped like kubeadm's `admin.conf`.

use std::fmt::Write as _;

use data_encoding::BASE64;

use crate::KeyedCert;

/// Renders a kubeconfig (YAML) that reaches `server_url`, trusts `ca` and authenticates as `user`
/// (its certificate and key embedded as base64 `*-data`).
///
/// `name` names the cluster; the user is `admin@<name>`, and so is the context, which is current.
/// Both strings are quoted, so any value yields valid YAML.
pub fn render_kubeconfig(name: &str, server_url: &str, ca: &KeyedCert, user: &KeyedCert) -> String {
    let cluster = quote(name);
    let user_name = quote(&format!("admin@{name}"));
    let server = quote(server_url);
    let ca_data = BASE64.encode(ca.cert_pem().as_bytes());
    let cert_data = BASE64.encode(user.cert_pem().as_bytes());
    let key_data = BASE64.encode(user.key_pem().as_bytes());
    format!(
        "apiVersion: v1
kind: Config
clusters:
- cluster:
    certificate-authority-data: {ca_data}
    server: {server}
  name: {cluster}
contexts:
- context:
    cluster: {cluster}
    user: {user_name}
  name: {user_name}
current-context: {user_name}
preferences: {{}}
users:
- name: {user_name}
  user:
    client-certificate-data: {cert_data}
    client-key-data: {key_data}
"
    )
}

/// A YAML double-quoted scalar (JSON's escaping, which YAML 1.2 accepts).
fn quote(value: &str) -> String {
    let mut out = String::with_capacity(value.len() + 2);
    out.push('"');
    for c in value.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            c if c.is_control() => {
                let _ = write!(out, "\\u{:04x}", u32::from(c));
            }
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quote_escapes_what_would_break_yaml() {
        assert_eq!(quote("https://127.0.0.1:6443"), "\"https://127.0.0.1:6443\"");
        assert_eq!(quote("a\"b\\c\nd\u{1}"), "\"a\\\"b\\\\c\\nd\\u0001\"");
    }
}
