package azure_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/switchyard-dev/switchyard/internal/upstream"
	"github.com/switchyard-dev/switchyard/internal/upstream/azure"
	"github.com/switchyard-dev/switchyard/internal/upstream/azure/azuretest"
	"github.com/switchyard-dev/switchyard/internal/upstream/clientcred"
)

func entraTarget(f *azuretest.Fake) upstream.Target {
	return upstream.Target{Type: "AzureOpenAI", BaseURL: f.URL, ClientSecret: azuretest.ClientSecret, Provider: "inference/azure-entra",
		Settings: upstream.Settings{AzureAPIVersion: azuretest.APIVersion,
			AzureEntra: upstream.AzureEntra{TenantID: azuretest.TenantID, ClientID: azuretest.ClientID, AuthorityHost: f.AuthorityHost() + "/"}}}
}

const entraChat = `{"model":"gpt-4o-prod","messages":[{"role":"user","content":"hi"}]}`

func roundTrip(t *testing.T, a upstream.Adapter, tg upstream.Target) (*http.Response, string) {
	t.Helper()
	resp, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: "/v1/chat/completions", Body: []byte(entraChat),
		Header: http.Header{"Authorization": {"Bearer client-key"}}})
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestTokenURL(t *testing.T) {
	for _, tc := range []struct{ host, want string }{
		{"", "https://login.microsoftonline.com/contoso.onmicrosoft.com/oauth2/v2.0/token"},
		{"https://login.microsoftonline.us/", "https://login.microsoftonline.us/contoso.onmicrosoft.com/oauth2/v2.0/token"},
	} {
		if got := azure.TokenURL(upstream.AzureEntra{TenantID: "contoso.onmicrosoft.com", AuthorityHost: tc.host}); got != tc.want {
			t.Errorf("authority %q: %s, want %s", tc.host, got, tc.want)
		}
	}
}

// TestEntra: with spec.azure.entra the adapter gets a token from the
// tenant's token endpoint once for many requests (concurrent ones too),
// sends it as the bearer (no api-key, never the client's Authorization), a
// new one shortly before it expires, and a new one with one more try after
// a 401 from the resource, and only one more.
func TestEntra(t *testing.T) {
	f := azuretest.New("gpt-4o-prod")
	defer f.Close()
	a := azure.New(http.DefaultTransport)
	now := time.Now()
	var clock sync.Mutex
	azure.SetClock(a, func() time.Time { clock.Lock(); defer clock.Unlock(); return now })
	advance := func(d time.Duration) { clock.Lock(); now = now.Add(d); clock.Unlock() }
	tg := entraTarget(f)

	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := a.RoundTrip(context.Background(), tg, upstream.Request{Path: "/v1/chat/completions", Body: []byte(entraChat)})
			if err != nil {
				t.Error(err)
				return
			}
			resp.Body.Close()
			if resp.StatusCode != 200 {
				t.Errorf("status %d", resp.StatusCode)
			}
		}()
	}
	wg.Wait()
	for range 3 {
		if resp, b := roundTrip(t, a, tg); resp.StatusCode != 200 || !strings.Contains(b, "echo: hi") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	}
	if n := f.TokenRequests(); n != 1 {
		t.Fatalf("%d token requests for 11 calls, want 1", n)
	}
	first := f.Requests()[0].Authorization
	for _, r := range f.Requests() {
		if r.APIKey != "" || r.Authorization != first || !strings.HasPrefix(first, "Bearer eyJ") {
			t.Fatalf("fake saw api-key %q, authorization %q (first %q)", r.APIKey, r.Authorization, first)
		}
	}

	advance(3599*time.Second - clientcred.RefreshBefore - time.Second)
	roundTrip(t, a, tg)
	if n := f.TokenRequests(); n != 1 {
		t.Fatalf("renewed %s before the refresh margin", time.Second)
	}
	advance(2 * time.Second)
	roundTrip(t, a, tg)
	if n := f.TokenRequests(); n != 2 {
		t.Fatalf("%d token requests: not renewed within %s of expiry", n, clientcred.RefreshBefore)
	}

	t.Run("revoked: 401, a new token, once", func(t *testing.T) {
		f.Revoke()
		n, tokens := len(f.Requests()), f.TokenRequests()
		resp, b := roundTrip(t, a, tg)
		if resp.StatusCode != 200 || len(f.Requests()) != n+2 || f.TokenRequests() != tokens+1 {
			t.Fatalf("%d %s after %d requests, %d tokens", resp.StatusCode, b, len(f.Requests())-n, f.TokenRequests()-tokens)
		}
		f.SetReply(func(azuretest.Request) azuretest.Reply {
			return azuretest.Reply{Status: 401, ErrorBody: `{"error":{"code":"PermissionDenied","message":"The principal lacks the required data action"}}`}
		})
		defer f.SetReply(azuretest.Echo)
		n, tokens = len(f.Requests()), f.TokenRequests()
		resp, b = roundTrip(t, a, tg)
		if resp.StatusCode != 401 || len(f.Requests()) != n+2 || f.TokenRequests() != tokens+1 || !strings.Contains(b, "authentication_error") || strings.Contains(b, "eyJ") {
			t.Fatalf("%d %s after %d requests, %d tokens", resp.StatusCode, b, len(f.Requests())-n, f.TokenRequests()-tokens)
		}
	})

	t.Run("expired at Azure while cached: a new one", func(t *testing.T) {
		// A 1s token that the adapter's stopped clock still holds valid:
		// the resource's 401 for the expired token gets a new one.
		f.SetTokenTTL(time.Second)
		defer f.SetTokenTTL(3599 * time.Second)
		f.Revoke()
		roundTrip(t, a, tg) // a 1s token
		time.Sleep(1100 * time.Millisecond)
		n, tokens := len(f.Requests()), f.TokenRequests()
		resp, b := roundTrip(t, a, tg)
		if resp.StatusCode != 200 || len(f.Requests()) != n+2 || f.TokenRequests() != tokens+1 {
			t.Fatalf("%d %s after %d requests, %d tokens", resp.StatusCode, b, len(f.Requests())-n, f.TokenRequests()-tokens)
		}
	})

	t.Run("rotated secret: a new token", func(t *testing.T) {
		f.SetClientSecret("Rot~ated.secret-9876543210")
		defer f.SetClientSecret(azuretest.ClientSecret)
		rotated := entraTarget(f)
		rotated.ClientSecret = "Rot~ated.secret-9876543210"
		tokens := f.TokenRequests()
		if resp, b := roundTrip(t, a, rotated); resp.StatusCode != 200 || f.TokenRequests() != tokens+1 {
			t.Fatalf("%d %s, %d new tokens", resp.StatusCode, b, f.TokenRequests()-tokens)
		}
	})

	t.Run("wrong secret: 401 naming Entra's codes, the secret nowhere", func(t *testing.T) {
		bad := entraTarget(f)
		bad.ClientSecret = "not-the-secret~0123456789"
		n := len(f.Requests())
		resp, b := roundTrip(t, a, bad)
		if resp.StatusCode != 401 || !strings.Contains(b, "authentication_error") || !strings.Contains(b, "invalid_client") || !strings.Contains(b, "AADSTS7000215") || !strings.Contains(b, "Entra ID") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
		if strings.Contains(b, bad.ClientSecret) || strings.Contains(b, azuretest.ClientSecret) || strings.Contains(b, azuretest.ClientID) {
			t.Fatalf("the answer names the secret or the application: %s", b)
		}
		if len(f.Requests()) != n {
			t.Fatal("a request without a token reached Azure")
		}
	})

	t.Run("unknown tenant", func(t *testing.T) {
		other := entraTarget(f)
		other.Settings.AzureEntra.TenantID = "fabrikam.onmicrosoft.com"
		if resp, b := roundTrip(t, a, other); resp.StatusCode != 401 || !strings.Contains(b, "AADSTS90002") {
			t.Fatalf("%d %s", resp.StatusCode, b)
		}
	})

	t.Run("token endpoint down: an error without the secret", func(t *testing.T) {
		down := entraTarget(f)
		down.Settings.AzureEntra.AuthorityHost = "http://127.0.0.1:1"
		_, err := a.RoundTrip(context.Background(), down, upstream.Request{Path: "/v1/chat/completions", Body: []byte(entraChat)})
		if err == nil || strings.Contains(err.Error(), azuretest.ClientSecret) || !strings.Contains(err.Error(), "Entra ID token") {
			t.Fatalf("err %v", err)
		}
	})

	t.Run("no secret: an error", func(t *testing.T) {
		none := entraTarget(f)
		none.ClientSecret = ""
		if _, err := a.RoundTrip(context.Background(), none, upstream.Request{Path: "/v1/chat/completions", Body: []byte(entraChat)}); err == nil {
			t.Fatal("sent without a secret")
		}
	})
}

// TestFakeBearer: the fake resource refuses a token it did not issue with
// Azure's 401, which the adapter passes on in OpenAI's shape.
func TestFakeBearer(t *testing.T) {
	f := azuretest.New("gpt-4o-prod")
	defer f.Close()
	req, _ := http.NewRequest(http.MethodPost, f.URL+"/openai/deployments/gpt-4o-prod/chat/completions?api-version="+azuretest.APIVersion, strings.NewReader(entraChat))
	req.Header.Set("Authorization", "Bearer eyJmade.up.token")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 401 || !strings.Contains(string(b), "Access token is missing, invalid") {
		t.Fatalf("%d %s", resp.StatusCode, b)
	}
}
