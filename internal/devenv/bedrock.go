package devenv

import (
	"crypto/rand"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/rs/zerolog"

	"github.com/switchyard-dev/switchyard/internal/policy"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock"
	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
)

// startBedrock starts the fake runtime for provider p, of type Bedrock: on
// its baseURL's port, or a free one (free) recorded in moved.
//
// A provider of type Bedrock is not simulated as an OpenAI-compatible
// endpoint: dev runs the fake Bedrock runtime (bedrocktest) in its place,
// so the gateway's real Bedrock adapter does the work it does against
// AWS — translating to the Converse API, signing with SigV4, reading the
// binary event stream back — and the fake refuses any request whose
// signature does not verify. The fake is given the key pair the gateway
// signs with, which dev provides where the provider's credentials say:
//   - credentials.secretRef: dev writes a key pair it makes into a
//     directory it passes as the gateway's --provider-secrets-dir, as the
//     Secret would be mounted in Kubernetes (<dir>/<secret>/accessKeyId,
//     secretAccessKey);
//   - credentials.file: the key pair already in that directory;
//   - no credentials (the AWS default chain): AWS_ACCESS_KEY_ID and
//     AWS_SECRET_ACCESS_KEY (and AWS_SESSION_TOKEN) from the environment,
//     or, when they are unset, a key pair dev makes and sets there.
//
// The fake answers every request with "echo: " and the last user message
// (bedrocktest.Echo), at once.
func (s *Stack) startBedrock(p policy.Provider, free bool, host string, moved map[string]string, log zerolog.Logger) error {
	u, err := url.Parse(p.BaseURL)
	if err != nil {
		return fmt.Errorf("provider %s: base url: %w", p.Name, err)
	}
	addr := net.JoinHostPort(host, "0")
	if !free {
		port, err := urlPort(p.BaseURL)
		if err != nil {
			return fmt.Errorf("provider %s: %w", p.Name, err)
		}
		addr = net.JoinHostPort(host, strconv.Itoa(port))
	}
	creds, err := s.bedrockCredentials(p, log)
	if err != nil {
		return err
	}
	fake, err := bedrocktest.Start(bedrocktest.Options{Addr: addr, Region: p.Settings.BedrockRegion, Credentials: creds, Keep: bedrockKeep})
	if err != nil {
		return fmt.Errorf("provider %s: start the Bedrock fake: %w", p.Name, err)
	}
	if s.bedrock == nil {
		s.bedrock = map[string]*bedrocktest.Server{}
	}
	s.bedrock[p.Name] = fake
	got := fake.URL + strings.TrimSuffix(u.Path, "/")
	if got != strings.TrimSuffix(p.BaseURL, "/") {
		moved[p.BaseURL] = got
	}
	var names []string
	for _, m := range p.Models {
		if m.ServedName == "" {
			m.ServedName = m.Name
		}
		names = append(names, m.ServedName)
	}
	s.sims = append(s.sims, simulated{provider: true, name: p.Name, models: strings.Join(names, ", "), url: got,
		api: "Bedrock fake: Converse, SigV4 " + p.Settings.BedrockRegion})
	return nil
}

// bedrockKeep is how many requests a dev fake keeps for inspection.
const bedrockKeep = 256

// bedrockCredentials are the key pair the gateway will sign p's requests
// with, provided where p's credentials say (see above).
func (s *Stack) bedrockCredentials(p policy.Provider, log zerolog.Logger) (aws.Credentials, error) {
	switch cr := p.Credentials; {
	case cr.SecretName != "":
		if s.secretsDir == "" {
			dir, err := os.MkdirTemp("", "switchyard-dev-secrets-")
			if err != nil {
				return aws.Credentials{}, fmt.Errorf("provider %s: secrets directory: %w", p.Name, err)
			}
			s.tempDirs = append(s.tempDirs, dir)
			s.secretsDir = dir
		}
		dir := filepath.Join(s.secretsDir, cr.SecretName)
		c := devKeyPair()
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return aws.Credentials{}, fmt.Errorf("provider %s: secret %s: %w", p.Name, cr.SecretName, err)
		}
		for name, v := range map[string]string{bedrock.KeyAccessKeyID: c.AccessKeyID, bedrock.KeySecretAccessKey: c.SecretAccessKey} {
			if err := os.WriteFile(filepath.Join(dir, name), []byte(v), 0o600); err != nil {
				return aws.Credentials{}, fmt.Errorf("provider %s: secret %s: %w", p.Name, cr.SecretName, err)
			}
		}
		return c, nil
	case cr.File != "":
		var c aws.Credentials
		for name, v := range map[string]*string{bedrock.KeyAccessKeyID: &c.AccessKeyID, bedrock.KeySecretAccessKey: &c.SecretAccessKey, bedrock.KeySessionToken: &c.SessionToken} {
			b, err := os.ReadFile(filepath.Join(cr.File, name))
			if err != nil && (name != bedrock.KeySessionToken || !errors.Is(err, os.ErrNotExist)) {
				return aws.Credentials{}, fmt.Errorf("provider %s: credentials.file: the Bedrock fake checks signatures against the key pair there: %w", p.Name, err)
			}
			*v = strings.TrimSpace(string(b))
		}
		return c, nil
	}
	id, secret := os.Getenv("AWS_ACCESS_KEY_ID"), os.Getenv("AWS_SECRET_ACCESS_KEY")
	if id != "" && secret != "" {
		return aws.Credentials{AccessKeyID: id, SecretAccessKey: secret, SessionToken: os.Getenv("AWS_SESSION_TOKEN")}, nil
	}
	c := devKeyPair()
	for k, v := range map[string]string{"AWS_ACCESS_KEY_ID": c.AccessKeyID, "AWS_SECRET_ACCESS_KEY": c.SecretAccessKey, "AWS_SESSION_TOKEN": ""} {
		if err := os.Setenv(k, v); err != nil {
			return aws.Credentials{}, fmt.Errorf("provider %s: set %s: %w", p.Name, k, err)
		}
	}
	log.Info().Str("provider", p.Name).Msg("AWS credentials not set: using a key pair made for the Bedrock fake")
	return c, nil
}

// devKeyPair makes a key pair shaped like an IAM user's: AKIA and 16
// characters, and a 40-character secret.
func devKeyPair() aws.Credentials {
	const upper = "ABCDEFGHIJKLMNOPQRSTUVWXYZ234567"
	const secret = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	pick := func(alphabet string, n int) string {
		b := make([]byte, n)
		_, _ = rand.Read(b) // never fails (crypto/rand)
		for i := range b {
			b[i] = alphabet[int(b[i])%len(alphabet)]
		}
		return string(b)
	}
	return aws.Credentials{AccessKeyID: "AKIA" + pick(upper, 16), SecretAccessKey: pick(secret, 40)}
}

// BedrockFake is the fake runtime serving the Bedrock provider of that
// name; nil when the catalog has none.
func (s *Stack) BedrockFake(provider string) *bedrocktest.Server { return s.bedrock[provider] }
