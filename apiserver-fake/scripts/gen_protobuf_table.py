#!/usr/bin/env python3
"""Regenerates apiserver-fake/src/protobuf/messages.rs: the Kubernetes protobuf schema table.

For every message of the Kubernetes API (k8s.io/api, apimachinery, apiextensions-apiserver,
kube-aggregator) the table lists its fields in Go struct order: field number, JSON name, value type,
cardinality and how Go's JSON encoder treats the field's zero value. The facts come from two crates
that are only *read* here (neither is a dependency of the project):

* k8s-pb 0.9.0 (prost code generated from the upstream .proto files): field numbers, types,
  struct order, and the `+optional` markers in the doc comments;
* k8s-openapi 0.29.0: exact JSON field names (`podIP`, `x-kubernetes-...`) and which fields are
  required (non-`Option` there, i.e. no `omitempty` in Go).

Neither crate is in the workspace's lock file, so bring both into cargo's registry first (a scratch
manifest with `k8s-pb = "=0.9.0"` and `k8s-openapi = { version = "=0.29.0", features = ["latest"] }`,
then `cargo fetch` in it), and run from anywhere:

    python3 apiserver-fake/scripts/gen_protobuf_table.py [--registry DIR] [--check] [-v]

`--registry` names cargo's unpacked sources (default `~/.cargo/registry/src`, or
`$CARGO_HOME/registry/src`). `--check` writes nothing and exits 1 when the committed table differs
from what the crates give (`just check-generated` runs it). The output is committed; building the crate
never needs the registry sources.
"""
import collections
import glob
import os
import re
import sys

def _registry():
    if '--registry' in sys.argv:
        return sys.argv[sys.argv.index('--registry') + 1]
    cargo_home = os.environ.get('CARGO_HOME', os.path.expanduser('~/.cargo'))
    return os.path.join(cargo_home, 'registry', 'src')


def _crate_sources(pattern):
    found = sorted(glob.glob(os.path.join(_registry(), '*', pattern)), reverse=True)
    if not found:
        sys.exit(f'{pattern} not found under {_registry()} (see this script\'s docstring)')
    return found


REGISTRY = _registry()
PB = _crate_sources('k8s-pb-0.9.0/src')[0]
OPENAPI = _crate_sources('k8s-openapi-0.29.0/src/v1_*')
OUT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), '..', 'src', 'protobuf', 'messages.rs'))

# k8s-pb module directory -> Kubernetes proto package prefix.
ROOTS = {
    'api': 'k8s.io.api',
    'apimachinery': 'k8s.io.apimachinery',
    'apiextensions_apiserver': 'k8s.io.apiextensions-apiserver',
    'kube_aggregator': 'k8s.io.kube-aggregator',
}

# Go pointer scalars (`*int32`, `*bool`, `*string`, typed string pointers): on the wire only when
# set, and then kept in JSON even when zero. Integer and boolean `+optional` fields are treated as
# pointers unless listed in NON_POINTER (a zero that a pointer carries is meaningful: replicas: 0,
# automountServiceAccountToken: false); string `+optional` fields are `omitempty` values unless
# listed here.
STRING_POINTERS = {
    'api.core.v1.PersistentVolumeClaimSpec.storageClassName',
    'api.core.v1.PersistentVolumeClaimSpec.volumeMode',
    'api.core.v1.PersistentVolumeClaimSpec.volumeAttributesClassName',
    'api.core.v1.PersistentVolumeSpec.volumeMode',
    'api.core.v1.SeccompProfile.localhostProfile',
    'api.core.v1.AppArmorProfile.localhostProfile',
    'api.core.v1.PodSpec.runtimeClassName',
    'api.core.v1.PodSpec.preemptionPolicy',
    'api.core.v1.ServiceSpec.loadBalancerClass',
    'api.core.v1.ServiceSpec.ipFamilyPolicy',
    'api.core.v1.ServiceSpec.internalTrafficPolicy',
    'api.core.v1.ServiceSpec.trafficDistribution',
    'api.core.v1.ServicePort.appProtocol',
    'api.core.v1.EndpointPort.appProtocol',
    'api.core.v1.Container.restartPolicy',
    'api.core.v1.EphemeralContainerCommon.restartPolicy',
    'api.core.v1.PodSecurityContext.fsGroupChangePolicy',
    'api.core.v1.PodSecurityContext.seLinuxChangePolicy',
    'api.core.v1.PodSecurityContext.supplementalGroupsPolicy',
    'api.core.v1.SecurityContext.procMount',
    'api.core.v1.WindowsSecurityContextOptions.gmsaCredentialSpecName',
    'api.core.v1.WindowsSecurityContextOptions.gmsaCredentialSpec',
    'api.core.v1.WindowsSecurityContextOptions.runAsUserName',
    'api.core.v1.CSIVolumeSource.fsType',
    'api.core.v1.HostPathVolumeSource.type',
    'api.core.v1.PodDNSConfigOption.value',
    'api.core.v1.ClusterTrustBundleProjection.name',
    'api.core.v1.ClusterTrustBundleProjection.signerName',
    'api.core.v1.LoadBalancerIngress.ipMode',
    'api.core.v1.TopologySpreadConstraint.nodeAffinityPolicy',
    'api.core.v1.TopologySpreadConstraint.nodeTaintsPolicy',
    'api.core.v1.PodSpec.hostnameOverride',
    'api.batch.v1.JobSpec.completionMode',
    'api.batch.v1.JobSpec.podReplacementPolicy',
    'api.batch.v1.JobSpec.managedBy',
    'api.batch.v1.JobStatus.failedIndexes',
    'api.batch.v1.CronJobSpec.timeZone',
    'api.batch.v1.SuccessPolicyRule.succeededIndexes',
    'api.batch.v1.PodFailurePolicyOnExitCodesRequirement.containerName',
    'api.coordination.v1.LeaseSpec.holderIdentity',
    'api.coordination.v1.LeaseSpec.strategy',
    'api.coordination.v1.LeaseSpec.preferredHolder',
    'api.networking.v1.IngressSpec.ingressClassName',
    'api.networking.v1.NetworkPolicyPort.protocol',
    'api.discovery.v1.EndpointPort.name',
    'api.discovery.v1.EndpointPort.protocol',
    'api.discovery.v1.EndpointPort.appProtocol',
    'api.discovery.v1.Endpoint.hostname',
    'api.discovery.v1.Endpoint.nodeName',
    'api.discovery.v1.Endpoint.zone',
    'apimachinery.pkg.apis.meta.v1.DeleteOptions.propagationPolicy',
    'apimachinery.pkg.apis.meta.v1.ListOptions.sendInitialEvents',
    'api.storage.v1.StorageClass.reclaimPolicy',
    'api.storage.v1.StorageClass.volumeBindingMode',
    'api.storage.v1.CSIDriverSpec.fsGroupPolicy',
    # Found by the encoder's byte comparison with what kube-apiserver 1.36 stored in etcd.
    'api.core.v1.PersistentVolumeClaimStatus.currentVolumeAttributesClassName',
    'api.core.v1.EndpointAddress.nodeName',
    'api.policy.v1.PodDisruptionBudgetSpec.unhealthyPodEvictionPolicy',
    'api.policy.v1beta1.PodDisruptionBudgetSpec.unhealthyPodEvictionPolicy',
}

# Go non-pointer integers/booleans with `omitempty`: always on the wire, dropped from JSON when zero.
NON_POINTER = {
    'apimachinery.pkg.apis.meta.v1.ObjectMeta.generation',
    'apimachinery.pkg.apis.meta.v1.Condition.observedGeneration',
    'apimachinery.pkg.apis.meta.v1.Status.code',
    'apimachinery.pkg.apis.meta.v1.StatusDetails.retryAfterSeconds',
    'api.core.v1.Container.stdin',
    'api.core.v1.Container.stdinOnce',
    'api.core.v1.Container.tty',
    'api.core.v1.EphemeralContainerCommon.stdin',
    'api.core.v1.EphemeralContainerCommon.stdinOnce',
    'api.core.v1.EphemeralContainerCommon.tty',
    'api.core.v1.PodSpec.hostNetwork',
    'api.core.v1.PodSpec.hostPID',
    'api.core.v1.PodSpec.hostIPC',
    'api.core.v1.ContainerPort.hostPort',
    'api.core.v1.Probe.initialDelaySeconds',
    'api.core.v1.Probe.timeoutSeconds',
    'api.core.v1.Probe.periodSeconds',
    'api.core.v1.Probe.successThreshold',
    'api.core.v1.Probe.failureThreshold',
    'api.core.v1.VolumeMount.readOnly',
    'api.core.v1.ServicePort.nodePort',
    'api.core.v1.ServiceSpec.healthCheckNodePort',
    'api.core.v1.ServiceSpec.publishNotReadyAddresses',
    'api.core.v1.ContainerStateTerminated.signal',
    'api.core.v1.PersistentVolumeClaimVolumeSource.readOnly',
    'api.core.v1.AWSElasticBlockStoreVolumeSource.partition',
    'api.core.v1.AWSElasticBlockStoreVolumeSource.readOnly',
    'api.core.v1.GCEPersistentDiskVolumeSource.partition',
    'api.core.v1.GCEPersistentDiskVolumeSource.readOnly',
    'api.core.v1.NFSVolumeSource.readOnly',
    'api.core.v1.ISCSIVolumeSource.readOnly',
    'api.core.v1.ISCSIVolumeSource.chapAuthDiscovery',
    'api.core.v1.ISCSIVolumeSource.chapAuthSession',
    'api.core.v1.Event.count',
    'api.apps.v1.DeploymentSpec.minReadySeconds',
    'api.apps.v1.DeploymentSpec.paused',
    'api.apps.v1.DeploymentStatus.observedGeneration',
    'api.apps.v1.DeploymentStatus.replicas',
    'api.apps.v1.DeploymentStatus.updatedReplicas',
    'api.apps.v1.DeploymentStatus.readyReplicas',
    'api.apps.v1.DeploymentStatus.availableReplicas',
    'api.apps.v1.DeploymentStatus.unavailableReplicas',
    'api.apps.v1.ReplicaSetSpec.minReadySeconds',
    'api.apps.v1.ReplicaSetStatus.fullyLabeledReplicas',
    'api.apps.v1.ReplicaSetStatus.readyReplicas',
    'api.apps.v1.ReplicaSetStatus.availableReplicas',
    'api.apps.v1.ReplicaSetStatus.observedGeneration',
    'api.apps.v1.StatefulSetSpec.minReadySeconds',
    'api.apps.v1.StatefulSetStatus.observedGeneration',
    'api.apps.v1.StatefulSetStatus.readyReplicas',
    'api.apps.v1.StatefulSetStatus.currentReplicas',
    'api.apps.v1.StatefulSetStatus.updatedReplicas',
    'api.apps.v1.DaemonSetSpec.minReadySeconds',
    'api.apps.v1.DaemonSetStatus.observedGeneration',
    'api.apps.v1.DaemonSetStatus.updatedNumberScheduled',
    'api.apps.v1.DaemonSetStatus.numberAvailable',
    'api.apps.v1.DaemonSetStatus.numberUnavailable',
    'api.batch.v1.JobStatus.active',
    'api.batch.v1.JobStatus.succeeded',
    'api.batch.v1.JobStatus.failed',
    # Found by comparing with what kube-apiserver 1.36 stored and served.
    'api.core.v1.NodeSpec.unschedulable',
    'api.core.v1.PodStatus.observedGeneration',
    'api.scheduling.v1.PriorityClass.globalDefault',
    'api.policy.v1.PodDisruptionBudgetStatus.observedGeneration',
    'api.policy.v1beta1.PodDisruptionBudgetStatus.observedGeneration',
}

# JSON names that neither k8s-openapi nor lowerCamelCase give (JSONSchemaProps' `$ref`, ...).
JSON_OVERRIDES = {
    'j_son_schemas': 'JSONSchemas',
}

# Messages whose Go types marshal to JSON specially; their bodies are decoded by hand in Rust.
SPECIAL = {
    'apimachinery.pkg.apis.meta.v1.Time': 'Time',
    'apimachinery.pkg.apis.meta.v1.MicroTime': 'MicroTime',
    'apimachinery.pkg.apis.meta.v1.Duration': 'Duration',
    'apimachinery.pkg.apis.meta.v1.FieldsV1': 'FieldsV1',
    'apimachinery.pkg.apis.meta.v1.Verbs': 'StringList',
    'apimachinery.pkg.api.resource.Quantity': 'Quantity',
    'apimachinery.pkg.api.resource.QuantityValue': 'Quantity',
    'apimachinery.pkg.util.intstr.IntOrString': 'IntOrString',
    'apimachinery.pkg.runtime.RawExtension': 'RawExtension',
    'api.authentication.v1.ExtraValue': 'StringList',
    'api.authentication.v1beta1.ExtraValue': 'StringList',
    'api.authorization.v1.ExtraValue': 'StringList',
    'api.authorization.v1beta1.ExtraValue': 'StringList',
    'api.certificates.v1.ExtraValue': 'StringList',
    'api.certificates.v1beta1.ExtraValue': 'StringList',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1.JSON': 'Json',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSON': 'Json',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrArray': 'SchemaOrArray',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaPropsOrArray': 'SchemaOrArray',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrBool': 'SchemaOrBool',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaPropsOrBool': 'SchemaOrBool',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1.JSONSchemaPropsOrStringArray': 'SchemaOrStringArray',
    'apiextensions_apiserver.pkg.apis.apiextensions.v1beta1.JSONSchemaPropsOrStringArray':
        'SchemaOrStringArray',
}

# Go type names that prost renamed (JSON -> Json); the table uses the proto message names.
PROTO_NAMES = {'Json': 'JSON', 'JsonSchemaProps': 'JSONSchemaProps', 'JsonSchemaPropsOrArray':
               'JSONSchemaPropsOrArray', 'JsonSchemaPropsOrBool': 'JSONSchemaPropsOrBool',
               'JsonSchemaPropsOrStringArray': 'JSONSchemaPropsOrStringArray'}

SCALARS = {'string': 'String', 'bool': 'Bool', 'int32': 'Int32', 'int64': 'Int64', 'double': 'Double',
           'bytes': 'Bytes'}


def norm(name):
    """Field names compared across crates: k8s-pb's `non_resource_ur_ls`, JSON's `nonResourceURLs`."""
    return re.sub(r'[^a-z0-9]', '', name.removeprefix('r#').lower())


def global_names():
    """The most common k8s-openapi JSON spelling of each normalized field name (for types it lacks)."""
    counts = collections.defaultdict(collections.Counter)
    for base in OPENAPI:
        for path in glob.glob(f'{base}/**/*.rs', recursive=True):
            for m in re.finditer(r'"([^"]+)" => Field::Key_([a-z0-9_]+)', open(path).read()):
                counts[norm(m.group(1))][m.group(1)] += 1
    return {rust: c.most_common(1)[0][0] for rust, c in counts.items()}


GLOBAL_NAMES = global_names()
FALLBACKS = []


def snake(name):
    return re.sub(r'(?<=[a-z0-9])([A-Z])|(?<=[A-Z])([A-Z])(?=[a-z])', r'_\1\2', name).lower()


def camel(rust):
    parts = rust.split('_')
    return parts[0] + ''.join(p[:1].upper() + p[1:] for p in parts[1:])


def openapi_fields(rel, struct):
    """k8s-openapi's view of a type: {norm(JSON name): (JSON name, required)} and the Go type name."""
    for base in OPENAPI:
        path = os.path.join(base, *rel, snake(struct) + '.rs')
        if not os.path.exists(path):
            continue
        text = open(path).read()
        required = set()
        body = re.search(r'pub struct \w+ \{(.*?)\n\}', text, re.S)
        if body:
            for m in re.finditer(r'pub (?:r#)?([a-z0-9_]+): (.*),', body.group(1)):
                if not m.group(2).startswith('Option<'):
                    required.add(m.group(1))
        fields = {norm(m.group(1)): (m.group(1), m.group(2) in required)
                  for m in re.finditer(r'"([^"]+)" => Field::Key_([a-z0-9_]+)', text)}
        definition = re.search(r'Generated from definition ([\w.-]+)', text)
        return fields, definition.group(1).rsplit('.', 1)[1] if definition else struct
    return None


def parse_module(path, rel):
    """Yields (struct, [(prost attribute, Rust field name, Rust type, has `+optional`)]) in source order."""
    text = open(path).read()
    for m in re.finditer(r'pub struct (\w+) \{(?:\}|\n(.*?)\n\})', text, re.S):
        struct, body = m.group(1), m.group(2) or ''
        fields = []
        comment = []
        attr = None
        for raw in re.split(r'\n(?=\s*(?:///|#\[|pub ))', body):
            line = ' '.join(x.strip() for x in raw.splitlines())
            if line.startswith('///'):
                comment.append(line)
            elif line.startswith('#[prost('):
                attr = line
            elif line.startswith('pub '):
                fm = re.match(r'pub (?:r#)?([a-z0-9_]+): (.*),$', line)
                if not fm or attr is None:
                    sys.exit(f'cannot parse field in {path} {struct}: {line!r}')
                optional = any('+optional' in c for c in comment)
                fields.append((attr, fm.group(1), fm.group(2), optional))
                comment, attr = [], None
        yield struct, fields


def resolve(module, rust_type):
    t = re.sub(r'\s+', '', rust_type).replace(',>', '>').rstrip(',')
    for wrapper in ('::core::option::Option<', '::prost::alloc::vec::Vec<', '::prost::alloc::boxed::Box<'):
        while t.startswith(wrapper):
            t = t[len(wrapper):-1]
    segs = t.split('::')
    base = list(module)
    while segs and segs[0] == 'super':
        base.pop()
        segs.pop(0)
    return '.'.join(base + segs)


def flattened(pb_fields, path, outer, depth=0):
    """JSON-level names of a message if it were inlined into a type whose names are `outer`."""
    names = set()
    module = path.split('.')[:-1]
    for attr, rust, rust_type, _ in pb_fields[path]:
        if norm(rust) not in outer and attr.startswith('#[prost(message') and depth < 3:
            names |= flattened(pb_fields, resolve(module, rust_type), outer, depth + 1)
        else:
            names.add(norm(rust))
    return names


def main():
    messages = {}
    parsed = []
    go_names = {}  # k8s-pb path (prost's UpperCamelCase) -> path with the Go type name
    for path in sorted(glob.glob(f'{PB}/**/mod.rs', recursive=True)):
        rel = os.path.relpath(os.path.dirname(path), PB).split(os.sep)
        if rel[0] not in ROOTS:
            continue
        for struct, fields in parse_module(path, rel):
            openapi = openapi_fields(rel, struct)
            go = openapi[1] if openapi else PROTO_NAMES.get(struct, struct)
            go_names['.'.join(rel + [struct])] = '.'.join(rel + [go])
            parsed.append((rel, struct, fields, openapi))
    pb_fields = {'.'.join(rel + [struct]): fields for rel, struct, fields, _ in parsed}
    for rel, struct, fields, openapi in parsed:
        name = go_names['.'.join(rel + [struct])]
        rows = []
        for attr, rust, rust_type, optional in fields:
            tag = int(re.search(r'tag = "(\d+)"', attr).group(1))
            known = openapi and openapi[0].get(norm(rust))
            json = JSON_OVERRIDES.get(rust) or (known and known[0]) or GLOBAL_NAMES.get(norm(rust)) or camel(rust)
            if known:
                # k8s-openapi: non-Option = required = no `omitempty` in Go.
                optional = not known[1]
            elif openapi and ', repeated' not in attr and attr.startswith('#[prost(message'):
                if flattened(pb_fields, resolve(rel, rust_type), set(openapi[0])) <= set(openapi[0]):
                    # An embedded Go struct (`json:",inline"`): its fields sit in the parent object.
                    json = ''
            if not known and json:
                FALLBACKS.append(f'{name}.{json}' + ('' if openapi else ' (type unknown to k8s-openapi)'))
            key = f'{name}.{json}'
            mm = re.search(r'map = "string, (\w+)"', attr)
            if mm:
                value = mm.group(1)
                if value == 'message':
                    inner = re.search(r'BTreeMap<[^,]+,(.*)>$', re.sub(r'\s+', '', rust_type)).group(1)
                    ty = f'Type::Message("{go_names[resolve(rel, inner)]}")'
                else:
                    ty = f'Type::{SCALARS[value]}'
                rows.append((tag, json, ty, 'Label::Map', 'Zero::Omit'))
                continue
            kind = attr[len('#[prost('):].split(',')[0].strip()
            label = 'Label::Repeated' if ', repeated' in attr else 'Label::Inline' if not json else 'Label::Single'
            if kind == 'message':
                ty = f'Type::Message("{go_names[resolve(rel, rust_type)]}")'
            elif kind in SCALARS:
                ty = f'Type::{SCALARS[kind]}'
            elif kind.startswith('bytes'):
                ty = 'Type::Bytes'
            else:
                sys.exit(f'unsupported prost type {kind!r} in {key}')
            if label != 'Label::Single' or kind == 'message':
                zero = 'Zero::Omit'
            elif not optional:
                zero = 'Zero::Keep'
            elif kind in ('string', 'bytes') or kind.startswith('bytes'):
                zero = 'Zero::Keep' if key in STRING_POINTERS else 'Zero::Omit'
            else:
                zero = 'Zero::Omit' if key in NON_POINTER else 'Zero::Keep'
            rows.append((tag, json, ty, label, zero))
        messages[name] = rows
    # Every message type a field refers to must be in the table.
    for name, rows in messages.items():
        for row in rows:
            ref = re.match(r'Type::Message\("(.*)"\)', row[2])
            if ref and ref.group(1) not in messages:
                sys.exit(f'{name}: unknown message {ref.group(1)}')
    bad = []
    for key in sorted(STRING_POINTERS | NON_POINTER):
        msg, field = key.rsplit('.', 1)
        if msg not in messages or not any(r[1] == field for r in messages[msg]):
            bad.append(key)
    if bad:
        sys.exit(f'overrides name no field: {bad}')

    def proto(name):
        parts = name.split('.')
        return ROOTS[parts[0]] + '.' + '.'.join(parts[1:])

    out = ['// @generated by apiserver-fake/scripts/gen_protobuf_table.py from k8s-pb 0.9.0 and k8s-openapi',
           '// 0.29.0 (read, not depended on). Do not edit by hand: change the script and rerun it.',
           '',
           'use super::schema::{Field, Label, Message, Special, Type, Zero};',
           '',
           '/// Every Kubernetes API message, sorted by proto name (binary-searched by `schema::message`).',
           '#[rustfmt::skip]',
           'pub(super) static MESSAGES: &[Message] = &[']
    for name in sorted(messages, key=proto):
        special = SPECIAL.get(name)
        out.append('    Message {')
        out.append(f'        name: "{proto(name)}",')
        out.append(f'        special: {"Some(Special::" + special + ")" if special else "None"},')
        out.append('        fields: &[')
        for tag, json, ty, label, zero in messages[name]:
            ty = re.sub(r'Type::Message\("(.*)"\)', lambda m: f'Type::Message("{proto(m.group(1))}")', ty)
            out.append(f'            Field {{ number: {tag}, json: "{json}", ty: {ty}, label: {label}, '
                       f'zero: {zero} }},')
        out.append('        ],')
        out.append('    },')
    out.append('];')
    text = '\n'.join(out) + '\n'
    if '--check' in sys.argv:
        with open(OUT, encoding='utf-8') as f:
            if f.read() != text:
                sys.exit(f'{OUT} is out of date: rerun {os.path.relpath(__file__)} without --check')
        print(f'{OUT} is up to date')
        return
    with open(OUT, 'w', encoding='utf-8') as f:
        f.write(text)
    missing = [k for k in SPECIAL if k not in messages]
    if missing:
        sys.exit(f'special messages not found: {missing}')
    if '-v' in sys.argv:
        print('fields without a k8s-openapi counterpart:', *FALLBACKS, sep='\n  ')
    print(f'{len(messages)} messages, {sum(len(r) for r in messages.values())} fields -> {OUT}')


if __name__ == '__main__':
    if any(a in ('-h', '--help') for a in sys.argv[1:]):
        print(__doc__)
        sys.exit(0)
    _unknown = [a for i, a in enumerate(sys.argv[1:], 1)
                if a not in ('--check', '-v', '--registry') and sys.argv[i - 1] != '--registry']
    if _unknown:
        sys.exit(f'gen_protobuf_table.py: unexpected argument {_unknown[0]} (see --help)')
    main()
