//! `certs generate --dir DIR --server NAME=IP[,IP]...`: write a cluster PKI and kubeconfigs.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use anyhow::{Context, bail};
use certs::{Pki, PkiSpec, ServerSpec};
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
        /// Folder to write into (created if missing).
        #[arg(long)]
        dir: PathBuf,
        /// A server and its IPs: NAME=IP[,IP]... (repeat for each server).
        #[arg(long = "server", required = true)]
        servers: Vec<String>,
        /// CN of the front-proxy client certificate.
        #[arg(long, default_value = "front-proxy-client")]
        front_proxy_client_cn: String,
        /// Secure port written into the kubeconfigs.
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
    Ok(ServerSpec {
        name: name.to_owned(),
        ips,
        dns: Vec::new(),
    })
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
    let spec = PkiSpec {
        servers,
        front_proxy_client_cn,
    };
    let pki = Pki::generate(&spec)?;
    let paths = pki.write_to(&dir)?;
    for server in &spec.servers {
        let host = match server.ips.first() {
            Some(IpAddr::V6(ip)) => format!("[{ip}]"),
            Some(ip) => ip.to_string(),
            None => "localhost".to_owned(),
        };
        pki.write_kubeconfig(
            &paths.kubeconfig(&server.name),
            &format!("https://{host}:{port}"),
            &server.name,
        )?;
    }
    println!("wrote the cluster PKI to {}", dir.display());
    for name in ["ca", "front-proxy-ca", "front-proxy-client", "admin"] {
        println!("  {name}.crt {name}.key");
    }
    for server in &spec.servers {
        println!(
            "  apiserver-{0}.crt apiserver-{0}.key {0}.kubeconfig",
            server.name
        );
    }
    Ok(())
}

fn main() -> ExitCode {
    let cli = Cli::parse();
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
