//! `certs generate --dir DIR --server NAME=IP[,IP]... [--front-proxy-client-cn CN] [--port 6443]`:
//! writes a cluster PKI in kubeadm's layout and an admin kubeconfig per server.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use certs::{DEFAULT_FRONT_PROXY_CLIENT_CN, Pki, PkiSpec, ServerSpec};
use clap::error::ErrorKind;
use clap::{Parser, Subcommand};

/// Cluster PKI in kubeadm's layout.
#[derive(Debug, Parser)]
#[command(name = "certs", version)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Generate the CAs, serving, front-proxy and admin certificates, and a kubeconfig per server.
    Generate {
        /// Folder to write into (created if missing; existing files are replaced).
        #[arg(long)]
        dir: PathBuf,
        /// A server and its IPs: NAME=IP[,IP]... (repeat for each server; at least one).
        #[arg(long = "server", value_name = "NAME=IP[,IP]...")]
        servers: Vec<String>,
        /// CN of the front-proxy client certificate.
        #[arg(long, default_value = DEFAULT_FRONT_PROXY_CLIENT_CN)]
        front_proxy_client_cn: String,
        /// Secure port written into the kubeconfigs (https://<first IP>:<port>).
        #[arg(long, default_value_t = 6443)]
        port: u16,
    },
}

fn parse_server(raw: &str) -> anyhow::Result<ServerSpec> {
    let Some((name, ips)) = raw.split_once('=') else {
        bail!("--server {raw:?}: expected NAME=IP[,IP]...");
    };
    let ips = ips
        .split(',')
        .map(|ip| {
            ip.trim()
                .parse::<IpAddr>()
                .with_context(|| format!("--server {raw:?}: {ip:?} is not an IP address"))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(ServerSpec::new(name, ips))
}

fn generate(
    dir: PathBuf,
    servers: &[String],
    front_proxy_client_cn: String,
    port: u16,
) -> anyhow::Result<()> {
    let servers = servers
        .iter()
        .map(|s| parse_server(s))
        .collect::<anyhow::Result<Vec<_>>>()?;
    let spec = PkiSpec::new(servers).with_front_proxy_client_cn(front_proxy_client_cn);
    let pki = Pki::generate(&spec)?;
    let paths = pki.write_to(&dir)?;
    let mut written = vec![
        paths.ca_cert.clone(),
        paths.ca_key.clone(),
        paths.front_proxy_ca_cert.clone(),
        paths.front_proxy_ca_key.clone(),
        paths.front_proxy_client_cert.clone(),
        paths.front_proxy_client_key.clone(),
        paths.admin_cert.clone(),
        paths.admin_key.clone(),
    ];
    for server in &spec.servers {
        let kubeconfig = paths.kubeconfig(&server.name);
        pki.write_kubeconfig(&kubeconfig, &server.url(port), &server.name)?;
        written.extend([
            paths.server_cert(&server.name),
            paths.server_key(&server.name),
            kubeconfig,
        ]);
    }
    for path in written {
        println!("wrote {}", path.display());
    }
    Ok(())
}

/// clap's usage error as one line: its message lines up to `Usage:` or `For more information`,
/// without tips.
fn usage_error_line(e: &clap::Error) -> String {
    if e.kind() == ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand {
        return "error: a command is required (see certs --help)".to_owned();
    }
    let rendered = e.render().to_string();
    let message: Vec<&str> = rendered
        .lines()
        .map(str::trim)
        .take_while(|line| !line.starts_with("Usage:") && !line.starts_with("For more information"))
        .filter(|line| !line.is_empty() && !line.starts_with("tip:"))
        .collect();
    format!("{} (see certs --help)", message.join(" "))
}

fn main() -> ExitCode {
    let cli = match Cli::try_parse() {
        Ok(cli) => cli,
        // --help and --version print as usual; usage errors are one line like every other error.
        Err(e) if !e.use_stderr() => e.exit(),
        Err(e) => {
            eprintln!("{}", usage_error_line(&e));
            return ExitCode::from(2);
        }
    };
    let result = match cli.command {
        Command::Generate {
            dir,
            servers,
            front_proxy_client_cn,
            port,
        } => generate(dir, &servers, front_proxy_client_cn, port),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e:#}");
            ExitCode::FAILURE
        }
    }
}
