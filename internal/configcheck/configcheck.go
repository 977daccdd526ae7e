// Package configcheck holds the checks every service's Config.Validate
// shares: listen addresses, server URL lists, durations. Errors never carry
// credentials: NATS and Redis URLs put passwords and tokens in their user
// part, and url.Parse's own errors quote the whole input.
package configcheck

import (
	"errors"
	"fmt"
	"net"
	"net/url"
	"strings"
	"time"
)

// Scheme sets of the servers Switchyard talks to.
var (
	NATSSchemes  = []string{"nats", "tls", "ws", "wss"}
	RedisSchemes = []string{"redis", "rediss", "unix"}
)

// ListenAddr checks host:port (host may be empty) with a valid port.
func ListenAddr(addr string) error {
	if addr == "" {
		return errors.New("empty")
	}
	_, port, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("%q: %w", addr, err)
	}
	if _, err := net.LookupPort("tcp", port); err != nil {
		return fmt.Errorf("%q: bad port: %w", addr, err)
	}
	return nil
}

// Loopback reports whether a listen address reaches only this host
// (127.0.0.0/8, ::1, localhost); an empty host (every interface) does not.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// URLList checks a comma-separated list of URLs (nats.go's server list
// form; a single URL is a list of one): each must parse, use one of
// schemes, and name a host (unix sockets excepted).
func URLList(list string, schemes ...string) error {
	for _, raw := range strings.Split(list, ",") {
		raw = strings.TrimSpace(raw)
		u, err := url.Parse(raw)
		if err != nil {
			return errors.New("not a valid URL") // err quotes raw
		}
		ok := false
		for _, s := range schemes {
			ok = ok || u.Scheme == s
		}
		if !ok {
			return fmt.Errorf("%s: scheme must be one of %s", redactOne(u), strings.Join(schemes, ", "))
		}
		if u.Scheme != "unix" && u.Hostname() == "" {
			return fmt.Errorf("%s: no host", redactOne(u))
		}
	}
	return nil
}

// Redact hides the user info of every URL in a comma-separated list, for
// logs and errors.
func Redact(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		if u, err := url.Parse(strings.TrimSpace(p)); err == nil {
			parts[i] = redactOne(u)
		} else {
			parts[i] = "<invalid url>"
		}
	}
	return strings.Join(parts, ",")
}

// redactOne hides the whole user info: NATS puts bare tokens there, which
// url.Redacted would print.
func redactOne(u *url.URL) string {
	if u.User == nil {
		return u.String()
	}
	c := *u
	c.User = url.User("REDACTED")
	return c.String()
}

// Duration is a named duration flag.
type Duration struct {
	Name  string
	Value time.Duration
}

// Positive returns one error per duration that is not positive.
func Positive(ds ...Duration) []error {
	var errs []error
	for _, d := range ds {
		if d.Value <= 0 {
			errs = append(errs, fmt.Errorf("%s: must be positive, got %s", d.Name, d.Value))
		}
	}
	return errs
}
