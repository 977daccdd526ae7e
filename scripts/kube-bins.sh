#!/usr/bin/env bash
# Builds the real Kubernetes API server and etcd that the tests run on
# loopback (internal/testkit/kubeapi) into bin/kube, from source through
# the Go module proxy, at the versions tools/kube/go.mod pins. Nothing is
# downloaded but Go modules. Skips the build when bin/kube was built from
# the same go.mod and go.sum. The first build takes several minutes on 2
# cores (kube-apiserver is large); Go's build cache makes later ones quick.
set -euo pipefail
cd "$(dirname "$0")/.."
out=bin/kube
want=$(cat tools/kube/go.mod tools/kube/go.sum | sha256sum | cut -c1-16)
if [ -x "$out/kube-apiserver" ] && [ -x "$out/etcd" ] && [ "$(cat "$out/.built-from" 2>/dev/null)" = "$want" ]; then
  exit 0
fi
mkdir -p "$out"
echo "Building kube-apiserver and etcd (tools/kube/go.mod) into $out; the first build takes several minutes..."
cd tools/kube
# Stamped as the release's own build is, so the server reports its version.
kv=$(GOWORK=off go list -m -f '{{.Version}}' k8s.io/kubernetes)
minor=$(echo "$kv" | cut -d. -f2)
ver=k8s.io/component-base/version
GOWORK=off go build -ldflags "-X $ver.gitVersion=$kv -X $ver.gitMajor=1 -X $ver.gitMinor=$minor -X $ver.gitTreeState=clean" \
  -o "../../$out/kube-apiserver" k8s.io/kubernetes/cmd/kube-apiserver
GOWORK=off go build -o "../../$out/etcd" go.etcd.io/etcd/server/v3
cd ../..
echo "$want" >"$out/.built-from"
"$out/kube-apiserver" --version
"$out/etcd" --version | sed -n 1p # reads it all: head would end etcd with SIGPIPE, which pipefail makes a failure
