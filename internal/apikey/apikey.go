// Package apikey is the format of Switchyard's API keys, shared by the
// gateway that checks them and yardctl that makes them: "sy-" and 43
// base64url characters (32 random bytes), stored only as "sha256:" and
// the hex SHA-256 of the key. A key of 256 random bits needs no slow
// hash: nobody can search the key space for a digest.
package apikey

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"strings"
)

// Prefix starts every Switchyard API key (and lets secret scanners find
// leaked ones).
const Prefix = "sy-"

// Key lengths accepted after the prefix: Generate's keys are 43
// characters; the range leaves room for other generators without
// admitting values that are not keys.
const (
	MinChars = 32
	MaxChars = 128
)

// Generate makes a new key: the prefix and 32 random bytes, base64url.
func Generate() string {
	var b [32]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand panics instead)
	return Prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// Digest is a key's stored form: "sha256:" and the hex SHA-256 of key.
func Digest(key string) string {
	sum := sha256.Sum256([]byte(key))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// WellFormed reports whether key has a Switchyard key's shape: the
// prefix, then MinChars to MaxChars base64url characters.
func WellFormed(key string) bool {
	rest, ok := strings.CutPrefix(key, Prefix)
	if !ok || len(rest) < MinChars || len(rest) > MaxChars {
		return false
	}
	for i := 0; i < len(rest); i++ {
		c := rest[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_') {
			return false
		}
	}
	return true
}
