# Regenerates schema.txt (protobuf field tags -> JSON names of the Kubernetes API types) from the
# prost sources of k8s-pb 0.9.0 and the serde field names of k8s-openapi 0.29.0 in ~/.cargo/registry:
#   python3 apiserver-fake/src/rest/protobuf/gen_schema.py
import os, re, json, glob, collections
pb = glob.glob(os.path.expanduser('~/.cargo/registry/src/*/k8s-pb-0.9.0/src'))[0]
oa = glob.glob(os.path.expanduser('~/.cargo/registry/src/*/k8s-openapi-0.29.0/src/v1_34'))[0]
names = collections.defaultdict(collections.Counter)
for path in glob.glob(oa + '/**/*.rs', recursive=True):
    for m in re.finditer(r'"([A-Za-z0-9_$-]+)" => Field::Key_([a-z0-9_]+)', open(path).read()):
        names[m.group(2)][m.group(1)] += 1
def camel(s):
    parts = s.split('_')
    return parts[0] + ''.join(p[:1].upper() + p[1:] for p in parts[1:])
def json_name(rust):
    rust = rust.removeprefix('r#')
    c = names.get(rust)
    if c:
        return c.most_common(1)[0][0]
    return camel(rust)
attr = re.compile(r'#\[prost\((.*)\)\]')
field = re.compile(r'pub (r#)?([a-z0-9_]+): (.*),$')
schema = {}
for path in glob.glob(pb + '/**/mod.rs', recursive=True):
    rel = os.path.relpath(os.path.dirname(path), pb).split(os.sep)
    if rel == ['.']: continue
    text = open(path).read()
    if 'prost::Message' not in text: continue
    mod = rel
    cur = None; pending = None
    lines = []
    buf = ''
    for line in text.splitlines():
        t = line.strip()
        if buf:
            buf += ' ' + t
            if (buf.endswith(',') and buf.count('<') == buf.count('>')) or buf.endswith(')]'):
                lines.append(buf); buf = ''
            continue
        if (t.startswith('pub ') and not t.startswith('pub struct') and not t.startswith('pub mod') and not t.endswith('{') and not (t.endswith(',') and t.count('<') == t.count('>'))) or (t.startswith('#[prost(') and not t.endswith(')]')):
            buf = t; continue
        lines.append(t)
    for s in lines:
        m = re.match(r'pub struct (\w+) \{', s)
        if m:
            cur = '.'.join(mod + [m.group(1)]); schema[cur] = []; continue
        if s == '}': cur = None; continue
        m = attr.match(s)
        if m and cur: pending = m.group(1); continue
        m = field.match(s)
        if m and cur and pending:
            rname, ty = m.group(2), m.group(3)
            a = pending; pending = None
            tag = int(re.search(r'tag = "(\d+)"', a).group(1))
            def resolve(t):
                t = t.strip()
                segs = t.split('::')
                base = list(mod)
                while segs and segs[0] == 'super':
                    base.pop(); segs.pop(0)
                return '.'.join(base + segs)
            if 'map' in a.split(',')[0]:
                mv = re.search(r'map = "string, (\w+)"', a).group(1)
                if mv == 'message':
                    ty = re.sub(r'\s+', '', ty).rstrip(',').replace(',>', '>')
                    v = re.search(r'Map<[^,]+,\s*(.*)>$', ty).group(1).rstrip(',').strip()
                    kind = 'map:message:' + resolve(v)
                else:
                    kind = 'map:' + mv
                card = 'map'; k = kind
            else:
                k = a.split(',')[0].strip()
                if k.startswith('bytes'): k = 'bytes'
                card = 'repeated' if 'repeated' in a else 'single'
                if k == 'message':
                    ty = re.sub(r'\s+', '', ty).rstrip(',').replace(',>', '>')
                    mm = re.search(r"(?:Option|Vec)<(.*)>$", ty)
                    if not mm: print("FAIL", repr(a), repr(ty)); continue
                    inner = mm.group(1)
                    if inner.startswith('::prost::alloc::boxed::Box<'):
                        inner = inner[len('::prost::alloc::boxed::Box<'):-1]
                    k = 'message:' + resolve(inner)
            schema[cur].append([tag, json_name(rname), k, card])
out = '\n'.join(
    name + ' ' + ';'.join(f'{t},{j},{k},{c}' for t, j, k, c in fields)
    for name, fields in sorted(schema.items()))
open(os.path.join(os.path.dirname(os.path.abspath(__file__)), 'schema.txt'), 'w').write(out + '\n')
print(len(schema), len(out))
