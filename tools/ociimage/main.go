// Command ociimage builds Switchyard's container image without a container
// engine: `make image` cross-compiles switchyard and yardctl (static,
// CGO_ENABLED=0) and runs it to write an OCI image layout and an OCI
// archive of it.
//
// The image is the Dockerfile's, built from scratch in one layer:
//
//	/usr/local/bin/switchyard, /usr/local/bin/yardctl   the binaries (root-owned, 0755)
//	/etc/ssl/certs/ca-certificates.crt                  Mozilla's roots (golang.org/x/crypto/x509roots/fallback), PEM
//	/etc/passwd, /etc/group                             the user and group nonroot, 65532
//	/home/nonroot                                       its home (0700), WorkingDir
//	/tmp                                                1777; the only place anything is written
//
// run as User 65532:65532 with Entrypoint /usr/local/bin/switchyard and the
// OCI labels. Every timestamp is -created (SOURCE_DATE_EPOCH; the Makefile
// passes the commit's time), so the same binaries give the same digest.
//
// The archive (-tar) is the layout tarred, plus a Docker manifest.json
// naming the same blobs (as `docker save` writes since Docker 25): docker
// load, podman load, skopeo (oci-archive: or docker-archive:) and crane push
// all read it; crane push also takes the layout directory (-out).
package main

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"crypto/x509"
	"debug/elf"
	"encoding/json"
	"encoding/pem"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/crypto/x509roots/fallback/bundle"
)

// The image's fixed facts; the Dockerfile says the same (and
// internal/imagetest checks both).
const (
	uid        = 65532
	userName   = "nonroot"
	home       = "/home/nonroot"
	binDir     = "/usr/local/bin"
	caBundle   = "/etc/ssl/certs/ca-certificates.crt"
	pathEnv    = "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"
	title      = "switchyard"
	descr      = "Switchyard: an inference control plane (switchyard, one subcommand per service, and yardctl)"
	licenses   = "Apache-2.0"
	createdBy  = "make image (tools/ociimage)"
	binEntry   = binDir + "/switchyard"
	passwdText = userName + ":x:65532:65532:" + userName + ":" + home + ":/sbin/nologin\n"
	groupText  = userName + ":x:65532:\n"
)

var binaries = []string{"switchyard", "yardctl"}

// A tag as the distribution spec allows it.
var tagRE = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

func main() {
	if err := run(os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "ociimage:", err)
		os.Exit(1)
	}
}

type options struct {
	binDir, arch, out, tarPath   string
	name, tag, version, revision string
	source                       string
	created                      time.Time
	compressionLevel             int
}

func run(args []string, stdout io.Writer) error {
	fset := flag.NewFlagSet("ociimage", flag.ContinueOnError)
	var o options
	var created string
	fset.StringVar(&o.binDir, "bin", "", "directory holding the linux binaries switchyard and yardctl (required)")
	fset.StringVar(&o.arch, "arch", "amd64", "GOARCH the binaries were built for: the image's architecture")
	fset.StringVar(&o.out, "out", "", "OCI image layout directory to write; replaced if it exists (required)")
	fset.StringVar(&o.tarPath, "tar", "", "OCI archive to write (the layout tarred, with a Docker manifest.json); none if empty")
	fset.StringVar(&o.name, "name", "ghcr.io/switchyard-dev/switchyard", "image name, without the tag")
	fset.StringVar(&o.tag, "tag", "", "image tag (required)")
	fset.StringVar(&o.version, "version", "", "org.opencontainers.image.version label (default: the tag)")
	fset.StringVar(&o.revision, "revision", "", "org.opencontainers.image.revision label: the commit")
	fset.StringVar(&o.source, "source", "https://github.com/switchyard-dev/switchyard", "org.opencontainers.image.source label")
	fset.StringVar(&created, "created", os.Getenv("SOURCE_DATE_EPOCH"), "creation time and every file's mtime, Unix seconds (default $SOURCE_DATE_EPOCH, else 0)")
	fset.IntVar(&o.compressionLevel, "gzip-level", gzip.DefaultCompression, "gzip level of the layer (9 saves 0.2%, taking twice as long)")
	if err := fset.Parse(args); err != nil {
		return err
	}
	if fset.NArg() > 0 {
		return fmt.Errorf("unexpected arguments %q", fset.Args())
	}
	switch {
	case o.binDir == "":
		return errors.New("-bin is required")
	case o.out == "":
		return errors.New("-out is required")
	case !tagRE.MatchString(o.tag):
		return fmt.Errorf("-tag %q is not a valid image tag (set VERSION or IMAGE_TAG)", o.tag)
	case o.name == "" || strings.Contains(o.name, "@") || strings.Contains(o.name[strings.LastIndex(o.name, "/")+1:], ":"):
		return fmt.Errorf("-name %q: want a repository name without tag or digest", o.name)
	}
	if o.version == "" {
		o.version = o.tag
	}
	secs := int64(0)
	if created != "" {
		var err error
		if secs, err = strconv.ParseInt(created, 10, 64); err != nil || secs < 0 {
			return fmt.Errorf("-created %q: want Unix seconds", created)
		}
	}
	o.created = time.Unix(secs, 0).UTC()

	img, err := build(o)
	if err != nil {
		return err
	}
	ref := o.name + ":" + o.tag
	if err := writeLayout(o.out, img, ref, o.arch); err != nil {
		return err
	}
	if o.tarPath != "" {
		if err := writeArchive(o.tarPath, o.out, img, ref, o.created); err != nil {
			return err
		}
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	size, err := layers[0].Size()
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "image %s (linux/%s)\ndigest %s\nlayer %.1f MB compressed\nlayout %s\n", ref, o.arch, digest, float64(size)/1e6, o.out)
	if o.tarPath != "" {
		fmt.Fprintf(stdout, "archive %s\n", o.tarPath)
	}
	return nil
}

// Labels returns the image's labels, also set as the manifest's
// annotations.
func labels(o options) map[string]string {
	return map[string]string{
		"org.opencontainers.image.title":       title,
		"org.opencontainers.image.description": descr,
		"org.opencontainers.image.source":      o.source,
		"org.opencontainers.image.version":     o.version,
		"org.opencontainers.image.revision":    o.revision,
		"org.opencontainers.image.licenses":    licenses,
	}
}

func build(o options) (v1.Image, error) {
	var gz bytes.Buffer
	zw, err := gzip.NewWriterLevel(&gz, o.compressionLevel) // no name, no mtime in the header
	if err != nil {
		return nil, err
	}
	if err := writeRootFS(zw, o); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz.Bytes())), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, err
	}

	created := v1.Time{Time: o.created}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History:   v1.History{Created: created, CreatedBy: createdBy, Comment: "switchyard, yardctl, CA certificates, user nonroot (65532), /tmp"},
	})
	if err != nil {
		return nil, err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return nil, err
	}
	cf = cf.DeepCopy()
	cf.Architecture = o.arch
	cf.OS = "linux"
	if o.arch == "arm64" {
		cf.Variant = "v8"
	}
	cf.Created = created
	cf.Author = ""
	cf.Config = v1.Config{
		Entrypoint: []string{binEntry},
		User:       fmt.Sprintf("%d:%d", uid, uid),
		WorkingDir: home,
		Env:        []string{pathEnv, "SSL_CERT_FILE=" + caBundle},
		Labels:     labels(o),
	}
	img, err = mutate.ConfigFile(img, cf)
	if err != nil {
		return nil, err
	}
	anns := labels(o)
	anns["org.opencontainers.image.created"] = o.created.Format(time.RFC3339)
	return mutate.Annotations(img, anns).(v1.Image), nil
}

// writeRootFS writes the layer's tar to w: directories before their
// contents, every header the same whatever the build host.
func writeRootFS(w io.Writer, o options) error {
	certs, err := caCertificates()
	if err != nil {
		return err
	}
	type file struct {
		name     string
		mode     int64
		owner    int
		dir      bool
		contents []byte
		path     string // contents read from this file
	}
	files := []file{
		{name: "etc/", mode: 0o755, dir: true},
		{name: "etc/group", mode: 0o644, contents: []byte(groupText)},
		{name: "etc/passwd", mode: 0o644, contents: []byte(passwdText)},
		{name: "etc/ssl/", mode: 0o755, dir: true},
		{name: "etc/ssl/certs/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(caBundle, "/"), mode: 0o644, contents: certs},
		{name: "home/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(home, "/") + "/", mode: 0o700, owner: uid, dir: true},
		{name: "tmp/", mode: 0o1777, dir: true},
		{name: "usr/", mode: 0o755, dir: true},
		{name: "usr/local/", mode: 0o755, dir: true},
		{name: strings.TrimPrefix(binDir, "/") + "/", mode: 0o755, dir: true},
	}
	for _, b := range binaries {
		files = append(files, file{name: strings.TrimPrefix(binDir, "/") + "/" + b, mode: 0o755, path: filepath.Join(o.binDir, b)})
	}

	tw := tar.NewWriter(w)
	for _, f := range files {
		if f.path != "" {
			data, err := os.ReadFile(f.path)
			if err != nil {
				return err
			}
			if err := checkBinary(f.path, data, o.arch); err != nil {
				return err
			}
			f.contents = data
		}
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.owner,
			Gid:     f.owner,
			ModTime: o.created,
		}
		if f.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.contents))
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if _, err := tw.Write(f.contents); err != nil {
			return err
		}
	}
	return tw.Close()
}

// caCertificates returns Mozilla's roots as a PEM bundle. A root NSS trusts
// only with a constraint X.509 cannot carry (distrust of what it issues
// after a date) is left out: a PEM file would trust it unconditionally.
func caCertificates() ([]byte, error) {
	var buf bytes.Buffer
	n := 0
	for root := range bundle.Roots() {
		if root.Constraint != nil {
			continue
		}
		if _, err := x509.ParseCertificate(root.Certificate); err != nil {
			return nil, fmt.Errorf("CA bundle: %w", err)
		}
		if err := pem.Encode(&buf, &pem.Block{Type: "CERTIFICATE", Bytes: root.Certificate}); err != nil {
			return nil, err
		}
		n++
	}
	if n < 50 {
		return nil, fmt.Errorf("CA bundle: only %d roots", n)
	}
	return buf.Bytes(), nil
}

var elfMachine = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkBinary refuses what would not run in the image: not a Linux
// executable of the architecture, or dynamically linked (nothing in the
// image to link against).
func checkBinary(path string, data []byte, arch string) error {
	f, err := elf.NewFile(bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("%s: not a Linux executable: %w", path, err)
	}
	defer f.Close()
	if want, ok := elfMachine[arch]; !ok {
		return fmt.Errorf("-arch %q: unsupported", arch)
	} else if f.Machine != want {
		return fmt.Errorf("%s: built for %v, not %s", path, f.Machine, arch)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("%s: dynamically linked (build with CGO_ENABLED=0)", path)
		}
	}
	return nil
}

// writeLayout writes img as the only image of a fresh OCI layout at dir,
// its index entry naming it and its platform.
func writeLayout(dir string, img v1.Image, ref, arch string) error {
	if err := os.RemoveAll(dir); err != nil {
		return err
	}
	p, err := layout.Write(dir, empty.Index)
	if err != nil {
		return err
	}
	if err := p.WriteImage(img); err != nil {
		return err
	}
	mt, err := img.MediaType()
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size, err := img.Size()
	if err != nil {
		return err
	}
	cf, err := img.ConfigFile()
	if err != nil {
		return err
	}
	desc := v1.Descriptor{
		MediaType:   mt,
		Size:        size,
		Digest:      digest,
		Annotations: refAnnotations(ref),
		Platform:    &v1.Platform{OS: cf.OS, Architecture: arch, Variant: cf.Variant},
	}
	if err := p.AppendDescriptor(desc); err != nil {
		return err
	}
	// ggcr writes index.json and oci-layout executable; they are data.
	return filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		return os.Chmod(path, 0o644)
	})
}

// refAnnotations name the image in index.json: podman and skopeo read
// ref.name, containerd (and Docker on it) io.containerd.image.name.
func refAnnotations(ref string) map[string]string {
	return map[string]string{
		"org.opencontainers.image.ref.name": ref,
		"io.containerd.image.name":          ref,
	}
}

// dockerManifest is one entry of a `docker save` manifest.json.
type dockerManifest struct {
	Config   string
	RepoTags []string
	Layers   []string
}

// writeArchive tars the layout at dir, in a fixed order with fixed headers,
// adding a Docker manifest.json that names the layout's blobs.
func writeArchive(path, dir string, img v1.Image, ref string, mtime time.Time) error {
	cfgDigest, err := img.ConfigName()
	if err != nil {
		return err
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	dm := dockerManifest{Config: blobPath(cfgDigest), RepoTags: []string{ref}}
	for _, l := range layers {
		d, err := l.Digest()
		if err != nil {
			return err
		}
		dm.Layers = append(dm.Layers, blobPath(d))
	}
	manifestJSON, err := json.Marshal([]dockerManifest{dm})
	if err != nil {
		return err
	}

	var names []string
	err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if p == dir {
			return nil
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		if d.IsDir() {
			rel += "/"
		}
		names = append(names, rel)
		return nil
	})
	if err != nil {
		return err
	}
	names = append(names, "manifest.json")
	// oci-layout first (some readers sniff it), then index.json and
	// manifest.json, then the blobs.
	rank := func(n string) int {
		switch n {
		case "oci-layout":
			return 0
		case "index.json":
			return 1
		case "manifest.json":
			return 2
		}
		return 3
	}
	slices.SortFunc(names, func(a, b string) int {
		if ra, rb := rank(a), rank(b); ra != rb {
			return ra - rb
		}
		return strings.Compare(a, b)
	})

	tmp, err := os.CreateTemp(filepath.Dir(path), ".ociimage-*.tar")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	tw := tar.NewWriter(tmp)
	for _, n := range names {
		h := &tar.Header{Name: n, ModTime: mtime, Mode: 0o644, Typeflag: tar.TypeReg}
		var r io.Reader
		switch {
		case strings.HasSuffix(n, "/"):
			h.Typeflag, h.Mode = tar.TypeDir, 0o755
		case n == "manifest.json":
			h.Size = int64(len(manifestJSON))
			r = bytes.NewReader(manifestJSON)
		default:
			f, err := os.Open(filepath.Join(dir, filepath.FromSlash(n)))
			if err != nil {
				return err
			}
			defer f.Close()
			fi, err := f.Stat()
			if err != nil {
				return err
			}
			h.Size = fi.Size()
			r = f
		}
		if err := tw.WriteHeader(h); err != nil {
			return err
		}
		if r != nil {
			if _, err := io.Copy(tw, r); err != nil {
				return err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return err
	}
	if err := tmp.Chmod(0o644); err != nil {
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), path)
}

func blobPath(h v1.Hash) string { return "blobs/" + h.Algorithm + "/" + h.Hex }
