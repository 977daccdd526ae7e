package imagetest

import (
	"archive/tar"
	"bufio"
	"bytes"
	"compress/gzip"
	"crypto/sha256"
	"crypto/x509"
	"debug/buildinfo"
	"debug/elf"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

// What the image is, stated once for both the image and the Dockerfile.
const (
	entrypoint = "/usr/local/bin/switchyard"
	user       = "65532:65532"
	workDir    = "/home/nonroot"
	caBundle   = "etc/ssl/certs/ca-certificates.crt"
)

var env = []string{
	"PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
	"SSL_CERT_FILE=/" + caBundle,
}

func labels(version, commit string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       "switchyard",
		"org.opencontainers.image.description": "Switchyard: an inference control plane (switchyard, one subcommand per service, and yardctl)",
		"org.opencontainers.image.source":      "https://github.com/switchyard-dev/switchyard",
		"org.opencontainers.image.version":     version,
		"org.opencontainers.image.revision":    commit,
		"org.opencontainers.image.licenses":    "Apache-2.0",
	}
}

// The image's build: stamps that cannot come from git, and a fixed time.
const (
	testImage   = "registry.example/switchyard/imagetest"
	testVersion = "v0.0.0-imagetest"
	testCommit  = "0123456789abcdef0123456789abcdef01234567"
	testEpoch   = 1700000000
)

const (
	ociIndex    = "application/vnd.oci.image.index.v1+json"
	ociManifest = "application/vnd.oci.image.manifest.v1+json"
	ociConfig   = "application/vnd.oci.image.config.v1+json"
	ociLayerGz  = "application/vnd.oci.image.layer.v1.tar+gzip"
)

type descriptor struct {
	MediaType   string            `json:"mediaType"`
	Digest      string            `json:"digest"`
	Size        int64             `json:"size"`
	Annotations map[string]string `json:"annotations"`
	Platform    *struct {
		OS           string `json:"os"`
		Architecture string `json:"architecture"`
	} `json:"platform"`
}

type index struct {
	SchemaVersion int          `json:"schemaVersion"`
	MediaType     string       `json:"mediaType"`
	Manifests     []descriptor `json:"manifests"`
}

type manifest struct {
	SchemaVersion int               `json:"schemaVersion"`
	MediaType     string            `json:"mediaType"`
	Config        descriptor        `json:"config"`
	Layers        []descriptor      `json:"layers"`
	Annotations   map[string]string `json:"annotations"`
}

type imageConfig struct {
	Architecture string    `json:"architecture"`
	OS           string    `json:"os"`
	Created      time.Time `json:"created"`
	Config       struct {
		User         string
		Entrypoint   []string
		Cmd          []string
		Env          []string
		WorkingDir   string
		Labels       map[string]string
		ExposedPorts map[string]struct{}
		Volumes      map[string]struct{}
	} `json:"config"`
	RootFS struct {
		Type    string   `json:"type"`
		DiffIDs []string `json:"diff_ids"`
	} `json:"rootfs"`
}

// dockerManifest is manifest.json's entry, what docker load reads.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

func repoRoot(t *testing.T) string {
	t.Helper()
	root, err := filepath.Abs(filepath.Join("..", ".."))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "Makefile")); err != nil {
		t.Fatalf("repository root: %v", err)
	}
	return root
}

// makeImage runs `make image` into out for this machine's architecture.
func makeImage(t *testing.T, root, out string) {
	t.Helper()
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("make is not installed")
	}
	cmd := exec.CommandContext(t.Context(), "make", "-C", root, "image",
		"IMAGE_OUT="+out, "GOARCH="+runtime.GOARCH, "IMAGE="+testImage,
		"VERSION="+testVersion, "COMMIT="+testCommit, "SOURCE_DATE_EPOCH="+strconv.Itoa(testEpoch))
	// Not the variables of a make that runs this test.
	cmd.Env = slices.DeleteFunc(os.Environ(), func(kv string) bool {
		return strings.HasPrefix(kv, "MAKEFLAGS=") || strings.HasPrefix(kv, "MFLAGS=") || strings.HasPrefix(kv, "MAKELEVEL=")
	})
	start := time.Now()
	outb, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("make image: %v\n%s", err, outb)
	}
	t.Logf("make image: %v\n%s", time.Since(start).Round(time.Second), outb)
}

// readTar returns a tar's regular files by name and its directories.
func readTar(t *testing.T, r io.Reader) (files map[string][]byte, headers map[string]*tar.Header) {
	t.Helper()
	files, headers = map[string][]byte{}, map[string]*tar.Header{}
	tr := tar.NewReader(r)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			return files, headers
		}
		if err != nil {
			t.Fatal(err)
		}
		if _, dup := headers[h.Name]; dup {
			t.Fatalf("%s twice in the tar", h.Name)
		}
		if strings.HasPrefix(h.Name, "/") || slices.Contains(strings.Split(h.Name, "/"), "..") {
			t.Fatalf("unsafe path %q", h.Name)
		}
		headers[h.Name] = h
		if h.Typeflag == tar.TypeReg {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[h.Name] = b
		}
	}
}

func sha256Hex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

func blobName(t *testing.T, digest string) string {
	t.Helper()
	hexs, ok := strings.CutPrefix(digest, "sha256:")
	if !ok || len(hexs) != 64 {
		t.Fatalf("digest %q", digest)
	}
	return "blobs/sha256/" + hexs
}

func unmarshal(t *testing.T, what string, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v\n%s", what, err, b)
	}
}

// TestImage builds the image with `make image` and reads it as a registry
// or a runtime would: the archive's index, manifest, config and layer,
// every blob checked against its digest; then runs the binaries from the
// layer. A second build must give the same bytes.
func TestImage(t *testing.T) {
	if testing.Short() {
		t.Skip("builds the binaries and the image; skipped in -short")
	}
	root := repoRoot(t)
	out := t.TempDir()
	makeImage(t, root, out)
	ref := testImage + ":" + testVersion
	created := time.Unix(testEpoch, 0).UTC()

	archive, err := os.ReadFile(filepath.Join(out, "image.tar"))
	if err != nil {
		t.Fatal(err)
	}
	files, headers := readTar(t, bytes.NewReader(archive))

	// The archive: an OCI layout plus manifest.json, each blob named by its
	// digest.
	var ociLayout struct{ ImageLayoutVersion string }
	unmarshal(t, "oci-layout", files["oci-layout"], &ociLayout)
	if ociLayout.ImageLayoutVersion != "1.0.0" {
		t.Errorf("oci-layout = %s", files["oci-layout"])
	}
	for name, b := range files {
		if hexs, ok := strings.CutPrefix(name, "blobs/sha256/"); ok && sha256Hex(b) != hexs {
			t.Errorf("%s: content's digest is sha256:%s", name, sha256Hex(b))
		}
	}
	var idx index
	unmarshal(t, "index.json", files["index.json"], &idx)
	if idx.SchemaVersion != 2 || idx.MediaType != ociIndex || len(idx.Manifests) != 1 {
		t.Fatalf("index.json: %s", files["index.json"])
	}
	md := idx.Manifests[0]
	if md.MediaType != ociManifest {
		t.Errorf("manifest's media type %q", md.MediaType)
	}
	if md.Annotations["org.opencontainers.image.ref.name"] != ref || md.Annotations["io.containerd.image.name"] != ref {
		t.Errorf("index annotations %v: want the reference %s", md.Annotations, ref)
	}
	if md.Platform == nil || md.Platform.OS != "linux" || md.Platform.Architecture != runtime.GOARCH {
		t.Errorf("index platform %+v: want linux/%s", md.Platform, runtime.GOARCH)
	}
	manifestJSON := files[blobName(t, md.Digest)]
	if int64(len(manifestJSON)) != md.Size {
		t.Fatalf("manifest: %d bytes, index says %d", len(manifestJSON), md.Size)
	}
	var m manifest
	unmarshal(t, "manifest", manifestJSON, &m)
	if m.SchemaVersion != 2 || m.MediaType != ociManifest || m.Config.MediaType != ociConfig || len(m.Layers) != 1 || m.Layers[0].MediaType != ociLayerGz {
		t.Fatalf("manifest: %s", manifestJSON)
	}
	wantAnns := labels(testVersion, testCommit)
	wantAnns["org.opencontainers.image.created"] = created.Format(time.RFC3339)
	if !maps.Equal(m.Annotations, wantAnns) {
		t.Errorf("manifest annotations\n got %v\nwant %v", m.Annotations, wantAnns)
	}
	configJSON := files[blobName(t, m.Config.Digest)]
	layerGz := files[blobName(t, m.Layers[0].Digest)]
	if int64(len(configJSON)) != m.Config.Size || int64(len(layerGz)) != m.Layers[0].Size {
		t.Fatalf("config %d bytes (manifest: %d), layer %d (manifest: %d)", len(configJSON), m.Config.Size, len(layerGz), m.Layers[0].Size)
	}
	wantNames := []string{"oci-layout", "index.json", "manifest.json", "blobs/", "blobs/sha256/",
		blobName(t, md.Digest), blobName(t, m.Config.Digest), blobName(t, m.Layers[0].Digest)}
	if got := slices.Sorted(maps.Keys(headers)); !slices.Equal(got, slices.Sorted(slices.Values(wantNames))) {
		t.Errorf("archive holds %q, want %q", got, wantNames)
	}

	// manifest.json, for docker load: the same blobs, the reference.
	var dms []dockerManifest
	unmarshal(t, "manifest.json", files["manifest.json"], &dms)
	if len(dms) != 1 || dms[0].Config != blobName(t, m.Config.Digest) || !slices.Equal(dms[0].Layers, []string{blobName(t, m.Layers[0].Digest)}) || !slices.Equal(dms[0].RepoTags, []string{ref}) {
		t.Errorf("manifest.json = %s", files["manifest.json"])
	}

	// The layout directory is what the archive holds.
	for name, b := range files {
		if name == "manifest.json" {
			continue
		}
		lb, err := os.ReadFile(filepath.Join(out, "oci", filepath.FromSlash(name)))
		if err != nil {
			t.Errorf("layout: %v", err)
		} else if !bytes.Equal(lb, b) {
			t.Errorf("layout's %s differs from the archive's", name)
		}
	}

	// The config.
	var cfg imageConfig
	unmarshal(t, "config", configJSON, &cfg)
	c := cfg.Config
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH {
		t.Errorf("platform %s/%s, want linux/%s", cfg.OS, cfg.Architecture, runtime.GOARCH)
	}
	if !cfg.Created.Equal(created) {
		t.Errorf("created %v, want SOURCE_DATE_EPOCH %v", cfg.Created, created)
	}
	if !slices.Equal(c.Entrypoint, []string{entrypoint}) || len(c.Cmd) != 0 {
		t.Errorf("entrypoint %q cmd %q, want [%s] and no cmd", c.Entrypoint, c.Cmd, entrypoint)
	}
	if c.User != user {
		t.Errorf("user %q, want %s", c.User, user)
	}
	if uid, _, _ := strings.Cut(c.User, ":"); uid == "" || uid == "0" || uid == "root" {
		t.Errorf("user %q runs as root", c.User)
	}
	if c.WorkingDir != workDir {
		t.Errorf("working directory %q, want %s", c.WorkingDir, workDir)
	}
	if !slices.Equal(c.Env, env) {
		t.Errorf("env %q, want %q", c.Env, env)
	}
	if !maps.Equal(c.Labels, labels(testVersion, testCommit)) {
		t.Errorf("labels\n got %v\nwant %v", c.Labels, labels(testVersion, testCommit))
	}
	if len(c.ExposedPorts) != 0 || len(c.Volumes) != 0 {
		t.Errorf("ports %v volumes %v: want none (each service listens where its flags say)", c.ExposedPorts, c.Volumes)
	}

	// The layer: its diff ID, then every file in it.
	zr, err := gzip.NewReader(bytes.NewReader(layerGz))
	if err != nil {
		t.Fatal(err)
	}
	layerTar, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.RootFS.Type != "layers" || !slices.Equal(cfg.RootFS.DiffIDs, []string{"sha256:" + sha256Hex(layerTar)}) {
		t.Errorf("rootfs %+v, want the layer's diff ID sha256:%s", cfg.RootFS, sha256Hex(layerTar))
	}
	lfiles, lheaders := readTar(t, bytes.NewReader(layerTar))
	type entry struct {
		typ      byte
		mode     int64
		uid, gid int
	}
	dir := func(mode int64) entry { return entry{tar.TypeDir, mode, 0, 0} }
	reg := func(mode int64) entry { return entry{tar.TypeReg, mode, 0, 0} }
	want := map[string]entry{
		"etc/":                     dir(0o755),
		"etc/group":                reg(0o644),
		"etc/passwd":               reg(0o644),
		"etc/ssl/":                 dir(0o755),
		"etc/ssl/certs/":           dir(0o755),
		caBundle:                   reg(0o644),
		"home/":                    dir(0o755),
		"home/nonroot/":            {tar.TypeDir, 0o700, 65532, 65532},
		"tmp/":                     dir(0o1777),
		"usr/":                     dir(0o755),
		"usr/local/":               dir(0o755),
		"usr/local/bin/":           dir(0o755),
		"usr/local/bin/switchyard": reg(0o755),
		"usr/local/bin/yardctl":    reg(0o755),
	}
	got := map[string]entry{}
	for name, h := range lheaders {
		got[name] = entry{h.Typeflag, h.Mode, h.Uid, h.Gid}
		if !h.ModTime.Equal(created) {
			t.Errorf("%s: mtime %v, want SOURCE_DATE_EPOCH %v", name, h.ModTime, created)
		}
	}
	if !maps.Equal(got, want) {
		t.Errorf("layer\n got %v\nwant %v", got, want)
	}

	// The one user and group, nonroot; no root.
	checkAccounts(t, "etc/passwd", lfiles["etc/passwd"], []string{"nonroot", "x", "65532", "65532", "nonroot", workDir, "/sbin/nologin"})
	checkAccounts(t, "etc/group", lfiles["etc/group"], []string{"nonroot", "x", "65532", ""})

	checkCABundle(t, lfiles[caBundle])

	// The binaries: static, built as the Dockerfile builds them, stamped;
	// run here when this machine can.
	bin := t.TempDir()
	for _, name := range []string{"switchyard", "yardctl"} {
		path := filepath.Join(bin, name)
		if err := os.WriteFile(path, lfiles["usr/local/bin/"+name], 0o755); err != nil {
			t.Fatal(err)
		}
		checkBinary(t, path)
	}
	if runtime.GOOS != "linux" {
		t.Logf("not running the linux binaries on %s", runtime.GOOS)
	} else {
		for _, args := range [][]string{{"switchyard", "--version"}, {"switchyard", "version"}, {"yardctl", "version"}} {
			out, err := exec.CommandContext(t.Context(), filepath.Join(bin, args[0]), args[1:]...).CombinedOutput()
			if err != nil {
				t.Errorf("%q: %v\n%s", args, err, out)
				continue
			}
			// The stamp, whole: version, commit, then the toolchain.
			re := regexp.MustCompile(`^` + args[0] + ` ` + regexp.QuoteMeta(testVersion) + ` \(commit ` + testCommit + `, go\S+ linux/` + runtime.GOARCH + `\)\n$`)
			if !re.Match(out) {
				t.Errorf("%q printed %q, want %s", args, out, re)
			}
		}
	}

	// Reproducible: the same tree, stamps and time give the same bytes.
	out2 := t.TempDir()
	makeImage(t, root, out2)
	archive2, err := os.ReadFile(filepath.Join(out2, "image.tar"))
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(archive, archive2) {
		t.Errorf("a second build differs: archive sha256 %s, then %s", sha256Hex(archive), sha256Hex(archive2))
	}
	t.Logf("image %s: manifest %s, layer %.1f MB compressed, %.1f MB uncompressed", ref, md.Digest, float64(len(layerGz))/1e6, float64(len(layerTar))/1e6)
}

// checkAccounts: the file (passwd or group) has one entry, the one wanted.
func checkAccounts(t *testing.T, name string, b []byte, want []string) {
	t.Helper()
	var entries [][]string
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		if line := sc.Text(); line != "" && !strings.HasPrefix(line, "#") {
			entries = append(entries, strings.Split(line, ":"))
		}
	}
	for _, e := range entries {
		if len(e) > 2 && e[2] == "0" {
			t.Errorf("%s has an entry with id 0: %q", name, e)
		}
	}
	if len(entries) != 1 || !slices.Equal(entries[0], want) {
		t.Errorf("%s = %q, want the one entry %q", name, b, strings.Join(want, ":"))
	}
}

// checkCABundle: PEM certificates only, each a CA, Mozilla's roots (many,
// Let's Encrypt's among them).
func checkCABundle(t *testing.T, b []byte) {
	t.Helper()
	n := 0
	subjects := map[string]bool{}
	for rest := b; len(bytes.TrimSpace(rest)) > 0; n++ {
		var block *pem.Block
		block, rest = pem.Decode(rest)
		if block == nil {
			t.Fatalf("CA bundle: not PEM after %d certificates: %.60q", n, rest)
		}
		if block.Type != "CERTIFICATE" || len(block.Headers) != 0 {
			t.Fatalf("CA bundle: block %d is %q %v", n, block.Type, block.Headers)
		}
		cert, err := x509.ParseCertificate(block.Bytes)
		if err != nil {
			t.Fatalf("CA bundle: certificate %d: %v", n, err)
		}
		if !cert.IsCA {
			t.Errorf("CA bundle: %s is not a CA", cert.Subject)
		}
		subjects[cert.Subject.CommonName] = true
	}
	if n < 100 {
		t.Errorf("CA bundle: %d certificates, want Mozilla's (over 100)", n)
	}
	for _, cn := range []string{"ISRG Root X1", "DigiCert Global Root G2"} {
		if !subjects[cn] {
			t.Errorf("CA bundle: no %s", cn)
		}
	}
}

// checkBinary: statically linked, for linux on this architecture, built
// with -trimpath and CGO_ENABLED=0.
func checkBinary(t *testing.T, path string) {
	t.Helper()
	f, err := elf.Open(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("%s is dynamically linked", path)
		}
	}
	bi, err := buildinfo.ReadFile(path)
	if err != nil {
		t.Fatalf("%s: %v", path, err)
	}
	settings := map[string]string{}
	for _, s := range bi.Settings {
		settings[s.Key] = s.Value
	}
	for k, v := range map[string]string{"CGO_ENABLED": "0", "-trimpath": "true", "GOOS": "linux", "GOARCH": runtime.GOARCH} {
		if settings[k] != v {
			t.Errorf("%s built with %s=%q, want %q", path, k, settings[k], v)
		}
	}
	// -trimpath leaves -ldflags out of the build info: running the
	// binaries checks the stamps.
}

// TestDockerfile: the Dockerfile describes the image make image builds
// (the same values TestImage checks there), builds the binaries the same
// way (the Makefile's -X stamps, static, -trimpath) and leaves the VCS and
// the build outputs out of its context.
func TestDockerfile(t *testing.T) {
	root := repoRoot(t)
	stages := dockerfileStages(t, filepath.Join(root, "Dockerfile"))
	if len(stages) < 2 {
		t.Fatalf("Dockerfile: %d stages, want a build stage and the image", len(stages))
	}
	final := stages[len(stages)-1]
	if from := final.values("FROM"); len(from) != 1 || (from[0] != "scratch" && !strings.HasPrefix(from[0], "gcr.io/distroless/static-debian12:nonroot")) {
		t.Errorf("final stage FROM %q: want distroless static nonroot or scratch", from)
	}

	gotLabels := map[string]string{}
	labelRE := regexp.MustCompile(`([a-z0-9.]+)="([^"]*)"`)
	for _, l := range final.values("LABEL") {
		for _, kv := range labelRE.FindAllStringSubmatch(l, -1) {
			gotLabels[kv[1]] = kv[2]
		}
	}
	if want := labels("${VERSION}", "${COMMIT}"); !maps.Equal(gotLabels, want) {
		t.Errorf("Dockerfile labels\n got %v\nwant %v", gotLabels, want)
	}
	if got := final.values("USER"); !slices.Equal(got, []string{user}) {
		t.Errorf("USER %q, want %s", got, user)
	}
	if got := final.values("WORKDIR"); !slices.Equal(got, []string{workDir}) {
		t.Errorf("WORKDIR %q, want %s", got, workDir)
	}
	if got := final.values("ENTRYPOINT"); !slices.Equal(got, []string{`["` + entrypoint + `"]`}) {
		t.Errorf("ENTRYPOINT %q, want [%q]", got, entrypoint)
	}
	if got := final.values("CMD"); len(got) != 0 {
		t.Errorf("CMD %q: want none, as make image", got)
	}
	var gotEnv []string
	for _, e := range final.values("ENV") {
		gotEnv = append(gotEnv, strings.Fields(e)...)
	}
	if !slices.Equal(gotEnv, env) {
		t.Errorf("ENV %q, want %q", gotEnv, env)
	}
	if got := final.values("COPY"); !slices.Equal(got, []string{"--from=build /out/switchyard /out/yardctl /usr/local/bin/"}) {
		t.Errorf("COPY %q: want the two binaries into /usr/local/bin", got)
	}
	for _, arg := range []string{"VERSION=", "COMMIT="} {
		if !slices.Contains(final.values("ARG"), arg) {
			t.Errorf("final stage lacks ARG %s (the labels use it)", arg)
		}
	}

	build := stages[0]
	if from := build.values("FROM"); len(from) != 1 || !strings.Contains(from[0], "golang:${GO_VERSION} AS build") {
		t.Errorf("build stage FROM %q", from)
	}
	run := strings.Join(build.values("RUN"), "\n")
	for _, want := range []string{"CGO_ENABLED=0", "go build -trimpath", "./cmd/switchyard ./cmd/yardctl"} {
		if !strings.Contains(run, want) {
			t.Errorf("build stage RUN lacks %q:\n%s", want, run)
		}
	}
	// Every -X of the Makefile's LDFLAGS, with the build argument of the
	// same name.
	mk, err := os.ReadFile(filepath.Join(root, "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	xs := regexp.MustCompile(`-X (\S+)=\$\((\w+)\)`).FindAllStringSubmatch(string(mk), -1)
	if len(xs) < 2 {
		t.Fatalf("Makefile: LDFLAGS has %d -X, want version and commit", len(xs))
	}
	for _, x := range xs {
		if want := "-X " + x[1] + "=${" + x[2] + "}"; !strings.Contains(run, want) {
			t.Errorf("build stage RUN lacks %q (the Makefile's LDFLAGS)", want)
		}
	}

	ignore, err := os.ReadFile(filepath.Join(root, ".dockerignore"))
	if err != nil {
		t.Fatal(err)
	}
	ignored := strings.Fields(string(regexp.MustCompile(`(?m)^#.*$`).ReplaceAll(ignore, nil)))
	for _, p := range []string{".git", "bin", "testdata-cache"} {
		if !slices.Contains(ignored, p) {
			t.Errorf(".dockerignore does not leave out %s", p)
		}
	}
}

type stage []instruction

type instruction struct{ cmd, args string }

func (s stage) values(cmd string) []string {
	var v []string
	for _, in := range s {
		if in.cmd == cmd {
			v = append(v, in.args)
		}
	}
	return v
}

// dockerfileStages splits a Dockerfile into its stages' instructions
// (continuations joined, comments dropped); instructions before the first
// FROM (global ARGs) are left out.
func dockerfileStages(t *testing.T, path string) []stage {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var stages []stage
	var logical strings.Builder
	flush := func() {
		line := strings.TrimSpace(logical.String())
		logical.Reset()
		if line == "" {
			return
		}
		cmd, args, _ := strings.Cut(line, " ")
		cmd = strings.ToUpper(cmd)
		args = strings.Join(strings.Fields(args), " ")
		if cmd == "FROM" {
			stages = append(stages, nil)
		}
		if len(stages) > 0 {
			stages[len(stages)-1] = append(stages[len(stages)-1], instruction{cmd, args})
		}
	}
	for _, line := range strings.Split(string(b), "\n") {
		if strings.HasPrefix(strings.TrimSpace(line), "#") {
			continue
		}
		if cont, ok := strings.CutSuffix(strings.TrimRight(line, " \t"), `\`); ok {
			logical.WriteString(cont + " ")
			continue
		}
		logical.WriteString(line)
		flush()
	}
	flush()
	return stages
}
