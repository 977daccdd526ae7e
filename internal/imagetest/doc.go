// Package imagetest tests the container image: the one `make image` builds
// without a container engine (tools/ociimage) and the Dockerfile, which
// must describe the same image. It has no code, only tests; they read the
// OCI layout and archive with the standard library, as any consumer would.
package imagetest
