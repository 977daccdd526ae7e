package bedrocktest_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	v4 "github.com/aws/aws-sdk-go-v2/aws/signer/v4"

	"github.com/switchyard-dev/switchyard/internal/upstream/bedrock/bedrocktest"
)

// post sends a Converse request to the fake, signed with creds for region.
func post(t *testing.T, fake *bedrocktest.Server, creds aws.Credentials, region, text string) int {
	t.Helper()
	body := []byte(`{"messages":[{"role":"user","content":[{"text":"` + text + `"}]}]}`)
	req, err := http.NewRequest(http.MethodPost, fake.URL+"/model/zai.glm-5-3-v1%3A0/converse", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	sum := sha256.Sum256(body)
	if err := v4.NewSigner().SignHTTP(context.Background(), creds, req, hex.EncodeToString(sum[:]), "bedrock", region, time.Now()); err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.StatusCode
}

// A fake started with Options checks signatures against its own
// credentials and region, counts every request, and keeps the last Keep.
func TestStartOptions(t *testing.T) {
	creds := aws.Credentials{AccessKeyID: "AKIADEVDEVDEVDEVDEV1", SecretAccessKey: "dev-secret"}
	fake, err := bedrocktest.Start(bedrocktest.Options{Region: "eu-west-3", Credentials: creds, Keep: 2})
	if err != nil {
		t.Fatal(err)
	}
	defer fake.Close()
	for i, text := range []string{"one", "two", "three"} {
		if code := post(t, fake, creds, "eu-west-3", text); code != http.StatusOK {
			t.Fatalf("request %d: status %d", i, code)
		}
	}
	if code := post(t, fake, bedrocktest.Credentials(), "eu-west-3", "other key"); code != http.StatusForbidden {
		t.Errorf("another key pair: status %d, want 403", code)
	}
	if code := post(t, fake, creds, "us-east-1", "other region"); code != http.StatusForbidden {
		t.Errorf("another region: status %d, want 403", code)
	}
	if got := fake.Counts(); got != (bedrocktest.Counts{Requests: 5, Refused: 2}) {
		t.Errorf("counts = %+v, want 5 requests, 2 refused", got)
	}
	reqs := fake.Requests()
	if len(reqs) != 2 || reqs[0].SignatureError == "" || reqs[1].SignatureError == "" {
		t.Fatalf("kept %d requests (%+v), want the last 2, both refused", len(reqs), reqs)
	}
	if reqs[0].ModelID != "zai.glm-5-3-v1:0" || reqs[0].Stream {
		t.Errorf("request: model %q, stream %v", reqs[0].ModelID, reqs[0].Stream)
	}
}
