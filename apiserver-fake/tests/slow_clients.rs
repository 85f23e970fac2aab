//! Slow and idle clients are cut off as kube-apiserver cuts them off: a connection that never
//! finishes its TLS handshake is closed after 10 s, one that never finishes its request headers after
//! `ReadHeaderTimeout` (32 s), so neither holds a descriptor for good.

mod support;

use std::sync::Arc;
use std::time::{Duration, Instant};

use rustls::RootCertStore;
use rustls_pki_types::pem::PemObject;
use rustls_pki_types::{CertificateDer, ServerName};
use support::{cluster, member};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// Reads until the server closes the connection; how long that took.
async fn until_closed(mut stream: impl AsyncReadExt + Unpin, within: Duration) -> Duration {
    let started = Instant::now();
    let mut buffer = [0u8; 1024];
    loop {
        match tokio::time::timeout(within, stream.read(&mut buffer)).await {
            Ok(Ok(0) | Err(_)) => return started.elapsed(),
            Ok(Ok(_)) => {}
            Err(_) => panic!("still open after {within:?}"),
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_that_never_finish_their_handshake_or_headers_are_closed() {
    let cluster = cluster(vec![member("a", 1, "1.36", &[])]).await;
    let addr = cluster.servers[0].1.local_addr();

    let silent = TcpStream::connect(addr).await.unwrap();
    let mut roots = RootCertStore::empty();
    for cert in CertificateDer::pem_file_iter(cluster.dir.join("ca.crt")).unwrap() {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let connector = tokio_rustls::TlsConnector::from(Arc::new(config));
    let tcp = TcpStream::connect(addr).await.unwrap();
    let mut tls = connector
        .connect(ServerName::try_from("localhost").unwrap(), tcp)
        .await
        .expect("handshake");
    // A request line and one header, never the blank line that ends the headers.
    tls.write_all(b"GET /version HTTP/1.1\r\nHost: a\r\n")
        .await
        .unwrap();
    tls.flush().await.unwrap();

    let (handshake, headers) = tokio::join!(
        until_closed(silent, Duration::from_secs(20)),
        until_closed(tls, Duration::from_secs(45)),
    );
    assert!(handshake >= Duration::from_secs(9), "closed after {handshake:?}");
    assert!(headers >= Duration::from_secs(31), "closed after {headers:?}");
}
