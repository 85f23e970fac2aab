//! Printers of networking kinds: Services and their endpoints, Ingresses, NetworkPolicies
//! (printers.go's `printService`, `printEndpoints`, `printEndpointSlice`, `printIngress`,
//! `printIngressClass`, `printNetworkPolicy`).

use serde_json::Value;

use super::format::{
    annotation, at, format_label_selector, format_labels, integer, list, load_balancer_addresses, name,
    non_empty, scalar, text, with_more,
};
use super::printers::{Column, Printer};

/// Service columns.
pub(super) fn service() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Type",
                "type determines how the Service is exposed. Defaults to ClusterIP. Valid options are ExternalName, ClusterIP, NodePort, and LoadBalancer.",
            ),
            Column::string(
                "Cluster-IP",
                "clusterIP is the IP address of the service and is usually assigned randomly.",
            ),
            Column::string(
                "External-IP",
                "externalIPs is a list of IP addresses for which nodes in the cluster will also accept traffic for this service.",
            ),
            Column::string(
                "Port(s)",
                "The list of ports that are exposed by this service.",
            ),
            Column::AGE,
            Column::string(
                "Selector",
                "Route service traffic to pods with label keys and values matching this selector. If empty or not present, the service is assumed to have an external process managing its endpoints, which Kubernetes will not modify.",
            )
            .wide(),
        ],
        |service, ctx| {
            // `spec.type` defaults to ClusterIP; `clusterIPs` is filled from `clusterIP` upstream.
            let service_type = non_empty(service, &["spec", "type"]).unwrap_or("ClusterIP");
            let cluster_ip = list(service, &["spec", "clusterIPs"])
                .first()
                .and_then(Value::as_str)
                .or_else(|| non_empty(service, &["spec", "clusterIP"]))
                .unwrap_or("<none>");
            let ports = service_ports(list(service, &["spec", "ports"]));
            vec![
                name(service).into(),
                service_type.into(),
                cluster_ip.into(),
                external_ip(service, service_type).into(),
                if ports.is_empty() { "<none>".to_owned() } else { ports }.into(),
                ctx.age(service),
                format_labels(at(service, &["spec", "selector"])).into(),
            ]
        },
    )
}

/// `getServiceExternalIP`: external IPs (and load-balancer ingress points) by service type.
fn external_ip(service: &Value, service_type: &str) -> String {
    let external: Vec<&str> = list(service, &["spec", "externalIPs"])
        .iter()
        .filter_map(Value::as_str)
        .collect();
    match service_type {
        "ClusterIP" | "NodePort" if external.is_empty() => "<none>".to_owned(),
        "ClusterIP" | "NodePort" => external.join(","),
        "LoadBalancer" => {
            let balancer = load_balancer_addresses(at(service, &["status", "loadBalancer"]));
            let mut all: Vec<&str> = balancer.split(',').filter(|s| !s.is_empty()).collect();
            all.extend(&external);
            if all.is_empty() {
                "<pending>".to_owned()
            } else {
                all.join(",")
            }
        }
        "ExternalName" => text(service, &["spec", "externalName"]).to_owned(),
        _ => "<unknown>".to_owned(),
    }
}

/// `makePortString`: `port/PROTO` or `port:nodePort/PROTO`, comma-separated.
fn service_ports(ports: &[Value]) -> String {
    ports
        .iter()
        .map(|port| {
            let protocol = non_empty(port, &["protocol"]).unwrap_or("TCP");
            let number = integer(port, &["port"]).unwrap_or(0);
            match integer(port, &["nodePort"]).filter(|n| *n > 0) {
                Some(node_port) => format!("{number}:{node_port}/{protocol}"),
                None => format!("{number}/{protocol}"),
            }
        })
        .collect::<Vec<_>>()
        .join(",")
}

/// Endpoints columns.
pub(super) fn endpoints() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Endpoints",
                "The set of all endpoints is the union of all subsets. Addresses are placed into subsets according to the IPs they share.",
            ),
            Column::AGE,
        ],
        |endpoints, ctx| {
            vec![
                name(endpoints).into(),
                format_endpoints(list(endpoints, &["subsets"])).into(),
                ctx.age(endpoints),
            ]
        },
    )
}

/// `formatEndpoints`: the first three `ip:port`s (every address with every port; bare IPs for a
/// subset without ports), then `+ N more...`; `<none>` without subsets.
fn format_endpoints(subsets: &[Value]) -> String {
    const MAX: usize = 3;
    if subsets.is_empty() {
        return "<none>".to_owned();
    }
    let mut shown = Vec::new();
    let mut total = 0;
    for subset in subsets {
        let addresses = list(subset, &["addresses"]);
        let ports = list(subset, &["ports"]);
        if ports.is_empty() {
            total += addresses.len();
            shown.extend(addresses.iter().map(|a| text(a, &["ip"]).to_owned()));
            continue;
        }
        for port in ports {
            total += addresses.len();
            let number = integer(port, &["port"]).unwrap_or(0);
            shown.extend(addresses.iter().map(|a| {
                let ip = text(a, &["ip"]);
                // net.JoinHostPort brackets IPv6 addresses.
                if ip.contains(':') {
                    format!("[{ip}]:{number}")
                } else {
                    format!("{ip}:{number}")
                }
            }));
        }
    }
    shown.truncate(MAX);
    with_more(&shown, total)
}

/// EndpointSlice columns.
pub(super) fn endpoint_slice() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "AddressType",
                "addressType specifies the type of address carried by this EndpointSlice. All addresses in this slice must be the same type.",
            ),
            Column::string(
                "Ports",
                "ports specifies the list of network ports exposed by each endpoint in this slice.",
            ),
            Column::string(
                "Endpoints",
                "endpoints is a list of unique endpoints in this slice.",
            ),
            Column::AGE,
        ],
        |slice, ctx| {
            let ports: Vec<String> = list(slice, &["ports"])
                .iter()
                .map(|port| {
                    scalar(port.get("port").filter(|p| !p.is_null()))
                        .or_else(|| port.get("name").and_then(|n| scalar(Some(n))))
                        .unwrap_or_else(|| "*".to_owned())
                })
                .collect();
            let endpoints = list(slice, &["endpoints"]);
            let addresses: Vec<String> = endpoints
                .iter()
                .flat_map(|e| list(e, &["addresses"]))
                .filter_map(|a| scalar(Some(a)))
                .collect();
            let endpoints_cell = if endpoints.is_empty() {
                "<unset>".to_owned()
            } else {
                list_with_more(&addresses)
            };
            vec![
                name(slice).into(),
                text(slice, &["addressType"]).into(),
                list_with_more(&ports).into(),
                endpoints_cell.into(),
                ctx.age(slice),
            ]
        },
    )
}

/// `listWithMoreString` over the first three items; `<unset>` when there are none.
fn list_with_more(items: &[String]) -> String {
    if items.is_empty() {
        return "<unset>".to_owned();
    }
    with_more(&items[..items.len().min(3)], items.len())
}

/// Ingress columns.
pub(super) fn ingress() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Class",
                "The name of the IngressClass resource that should be used for additional configuration",
            ),
            Column::string(
                "Hosts",
                "Hosts that incoming requests are matched against before the ingress rule",
            ),
            Column::string(
                "Address",
                "Address is a list containing ingress points for the load-balancer",
            ),
            Column::string("Ports", "Ports of TLS configurations that open"),
            Column::AGE,
        ],
        |ingress, ctx| {
            let class = at(ingress, &["spec", "ingressClassName"])
                .and_then(Value::as_str)
                .unwrap_or("<none>");
            let ports = if list(ingress, &["spec", "tls"]).is_empty() {
                "80"
            } else {
                "80, 443"
            };
            vec![
                name(ingress).into(),
                class.into(),
                ingress_hosts(list(ingress, &["spec", "rules"])).into(),
                load_balancer_addresses(at(ingress, &["status", "loadBalancer"])).into(),
                ports.into(),
                ctx.age(ingress),
            ]
        },
    )
}

/// `formatHosts`: the hosts of the first three rules that name one, `+ N more...` counting rules
/// beyond three; `*` when none names a host.
fn ingress_hosts(rules: &[Value]) -> String {
    const MAX: usize = 3;
    let mut hosts = Vec::new();
    let mut more = false;
    for rule in rules {
        if hosts.len() == MAX {
            more = true;
        }
        if let Some(host) = non_empty(rule, &["host"]).filter(|_| !more) {
            hosts.push(host);
        }
    }
    if hosts.is_empty() {
        return "*".to_owned();
    }
    let joined = hosts.join(",");
    if more {
        format!("{joined} + {} more...", rules.len() - MAX)
    } else {
        joined
    }
}

/// IngressClass columns; `mark_default`: the default class's name gets ` (default)` (1.36 and
/// later).
pub(super) fn ingress_class(mark_default: bool) -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Controller",
                "Controller that is responsible for handling this class",
            ),
            Column::string(
                "Parameters",
                "A reference to a resource with additional parameters",
            ),
            Column::AGE,
        ],
        if mark_default {
            |class, ctx| ingress_class_cells(class, ctx, true)
        } else {
            |class, ctx| ingress_class_cells(class, ctx, false)
        },
    )
}

fn ingress_class_cells(class: &Value, ctx: &super::printers::PrintContext, mark_default: bool) -> Vec<Value> {
    let parameters = match at(class, &["spec", "parameters"]).filter(|p| p.is_object()) {
        Some(p) => {
            let mut kind = text(p, &["kind"]).to_owned();
            if let Some(group) = p.get("apiGroup").and_then(Value::as_str) {
                kind = format!("{kind}.{group}");
            }
            format!("{kind}/{}", text(p, &["name"]))
        }
        None => "<none>".to_owned(),
    };
    let mut class_name = name(class).to_owned();
    if mark_default && annotation(class, "ingressclass.kubernetes.io/is-default-class") == Some("true") {
        class_name.push_str(" (default)");
    }
    vec![
        class_name.into(),
        text(class, &["spec", "controller"]).into(),
        parameters.into(),
        ctx.age(class),
    ]
}

/// NetworkPolicy columns.
pub(super) fn network_policy() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "Pod-Selector",
                "podSelector selects the pods to which this NetworkPolicy object applies. An empty podSelector matches all pods in this namespace.",
            ),
            Column::AGE,
        ],
        |policy, ctx| {
            vec![
                name(policy).into(),
                // An absent podSelector is the empty one: every pod.
                format_label_selector(at(policy, &["spec", "podSelector"])).into(),
                ctx.age(policy),
            ]
        },
    )
}

/// ServiceCIDR columns.
pub(super) fn service_cidr() -> Printer {
    Printer::new(
        vec![
            Column::NAME,
            Column::string(
                "CIDRs",
                "CIDRs defines the IP blocks in CIDR notation (e.g. \"192.168.0.0/24\" or \"2001:db8::/64\") from which to assign service cluster IPs. Max of two CIDRs is allowed, one of each IP family. This field is immutable.",
            ),
            Column::AGE,
        ],
        |cidr, ctx| {
            let blocks: Vec<&str> = list(cidr, &["spec", "cidrs"])
                .iter()
                .filter_map(Value::as_str)
                .collect();
            vec![name(cidr).into(), blocks.join(",").into(), ctx.age(cidr)]
        },
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::catalog::KubeVersion;
    use crate::api::rest::table::age::parse_timestamp;
    use crate::api::rest::table::printers::PrintContext;
    use serde_json::json;

    fn ctx() -> PrintContext {
        PrintContext {
            now: parse_timestamp("2024-06-01T12:00:00Z").unwrap(),
            version: KubeVersion::NEWEST,
        }
    }

    fn cells(printer: Printer, object: Value) -> Vec<Value> {
        (printer.cells)(&object, &ctx())
    }

    #[test]
    fn services_print_type_addresses_and_ports() {
        let cluster_ip = json!({"metadata": {"name": "web", "creationTimestamp": "2024-06-01T11:00:00Z"},
            "spec": {"clusterIP": "10.96.0.10", "clusterIPs": ["10.96.0.10"], "selector": {"app": "web"},
                     "ports": [{"port": 80, "protocol": "TCP"}, {"port": 53, "protocol": "UDP"}]}});
        assert_eq!(
            cells(service(), cluster_ip),
            json!([
                "web",
                "ClusterIP",
                "10.96.0.10",
                "<none>",
                "80/TCP,53/UDP",
                "60m",
                "app=web"
            ])
            .as_array()
            .unwrap()
            .clone()
        );
        let lb = json!({"metadata": {"name": "lb"}, "spec": {"type": "LoadBalancer", "externalIPs": ["1.2.3.4"],
                "ports": [{"port": 443, "nodePort": 30443}]},
            "status": {"loadBalancer": {"ingress": [{"ip": "5.6.7.8"}]}}});
        assert_eq!(
            cells(service(), lb)[1..5],
            [
                json!("LoadBalancer"),
                json!("<none>"),
                json!("5.6.7.8,1.2.3.4"),
                json!("443:30443/TCP")
            ]
        );
        let pending = json!({"metadata": {"name": "p"}, "spec": {"type": "LoadBalancer"}});
        assert_eq!(
            cells(service(), pending)[3..5],
            [json!("<pending>"), json!("<none>")]
        );
        let external = json!({"metadata": {"name": "e"}, "spec": {"type": "ExternalName", "externalName": "db.example.com"}});
        assert_eq!(cells(service(), external)[3], "db.example.com");
    }

    #[test]
    fn endpoints_and_slices_list_three_then_count_the_rest() {
        let endpoints_object = json!({"metadata": {"name": "web"}, "subsets": [
            {"addresses": [{"ip": "10.0.0.1"}, {"ip": "10.0.0.2"}], "ports": [{"port": 80}, {"port": 443}]},
            {"addresses": [{"ip": "fd00::1"}]}]});
        assert_eq!(
            cells(endpoints(), endpoints_object)[1],
            "10.0.0.1:80,10.0.0.2:80,10.0.0.1:443 + 2 more..."
        );
        assert_eq!(
            cells(endpoints(), json!({"metadata": {"name": "e"}}))[1],
            "<none>"
        );
        let slice = json!({"metadata": {"name": "web-abc"}, "addressType": "IPv4",
            "ports": [{"name": "http", "port": 80}, {"name": "named"}, {}],
            "endpoints": [{"addresses": ["10.0.0.1"]}, {"addresses": ["10.0.0.2", "10.0.0.3", "10.0.0.4"]}]});
        assert_eq!(
            cells(endpoint_slice(), slice)[1..4],
            [
                json!("IPv4"),
                json!("80,named,*"),
                json!("10.0.0.1,10.0.0.2,10.0.0.3 + 1 more...")
            ]
        );
        let empty = json!({"metadata": {"name": "e"}, "addressType": "IPv6"});
        assert_eq!(
            cells(endpoint_slice(), empty)[2..4],
            [json!("<unset>"), json!("<unset>")]
        );
    }

    #[test]
    fn ingresses_classes_and_policies() {
        let ingress_object = json!({"metadata": {"name": "web"},
            "spec": {"ingressClassName": "nginx", "tls": [{"hosts": ["a.example"]}],
                     "rules": [{"host": "a.example"}, {}, {"host": "b.example"}, {"host": "c.example"}, {"host": "d.example"}]},
            "status": {"loadBalancer": {"ingress": [{"hostname": "lb.example"}]}}});
        assert_eq!(
            cells(ingress(), ingress_object)[1..5],
            [
                json!("nginx"),
                json!("a.example,b.example,c.example + 2 more..."),
                json!("lb.example"),
                json!("80, 443")
            ]
        );
        assert_eq!(
            cells(ingress(), json!({"metadata": {"name": "i"}}))[1..5],
            [json!("<none>"), json!("*"), json!(""), json!("80")]
        );
        let class = json!({"metadata": {"name": "nginx", "annotations": {"ingressclass.kubernetes.io/is-default-class": "true"}},
            "spec": {"controller": "k8s.io/ingress-nginx", "parameters": {"apiGroup": "k8s.example.com", "kind": "IngressParameters", "name": "external-lb"}}});
        assert_eq!(
            cells(ingress_class(true), class.clone())[..3],
            [
                json!("nginx (default)"),
                json!("k8s.io/ingress-nginx"),
                json!("IngressParameters.k8s.example.com/external-lb")
            ]
        );
        assert_eq!(cells(ingress_class(false), class)[0], "nginx");
        let cidr =
            json!({"metadata": {"name": "kubernetes"}, "spec": {"cidrs": ["10.96.0.0/28", "fd00::/108"]}});
        assert_eq!(cells(service_cidr(), cidr)[1], "10.96.0.0/28,fd00::/108");
        let policy = json!({"metadata": {"name": "deny"}, "spec": {"podSelector": {}}});
        assert_eq!(cells(network_policy(), policy)[1], "<none>");
        let policy =
            json!({"metadata": {"name": "web"}, "spec": {"podSelector": {"matchLabels": {"app": "web"}}}});
        assert_eq!(cells(network_policy(), policy)[1], "app=web");
    }
}
