package node

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"
)

const testToken = "0123456789abcdef0123456789abcdef"

// adminRequest sends one request to an admin endpoint and returns the
// status code and body.
func adminRequest(t *testing.T, method, url, contentType, auth, body string, host string) (int, string) {
	t.Helper()
	req, err := http.NewRequest(method, url, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	if auth != "" {
		req.Header.Set("Authorization", auth)
	}
	if host != "" {
		req.Host = host
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestAdminRefusals drives every refusal of a loopback admin endpoint with
// a token, then checks that the right requests still work: the reads
// without the token, /leave with it.
func TestAdminRefusals(t *testing.T) {
	c := newCluster(t, 1, 1, gossipTune)
	a, err := ServeAdmin(c.nodes[0], "127.0.0.1:0", AdminOptions{Token: []byte(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	base := "http://" + a.Addr().String()
	bearer := "Bearer " + testToken
	const jsonType = "application/json"
	for _, tc := range []struct {
		name                            string
		method, path, ctype, auth, body string
		host                            string
		code                            int
		reason                          string
	}{
		{"missing token", "POST", "/leave", jsonType, "", "{}", "", 401, "missing_token"},
		{"wrong token", "POST", "/leave", jsonType, "Bearer 0123456789abcdef0123456789abcdeX", "{}", "", 401, "wrong_token"},
		{"wrong token, other length", "POST", "/leave", jsonType, "Bearer x", "{}", "", 401, "wrong_token"},
		{"basic auth", "POST", "/leave", jsonType, "Basic dTpw", "{}", "", 401, "missing_token"},
		// What a plain HTML form on any web page can send: no token, a
		// form content type; and with the token, still not JSON.
		{"form post", "POST", "/leave", "application/x-www-form-urlencoded", "", "a=b", "", 401, "missing_token"},
		{"form post with token", "POST", "/leave", "application/x-www-form-urlencoded", bearer, "a=b", "", 415, "not_json"},
		{"text/plain with token", "POST", "/assassinate", "text/plain", bearer, `{"id":0}`, "", 415, "not_json"},
		{"GET on leave", "GET", "/leave", "", bearer, "", "", 405, "wrong_method"},
		{"GET on assassinate", "GET", "/assassinate?id=0", "", bearer, "", "", 405, "wrong_method"},
		{"POST on status", "POST", "/status", jsonType, bearer, "{}", "", 405, "wrong_method"},
		{"query parameters", "POST", "/assassinate?id=0", jsonType, bearer, "{}", "", 400, "query_parameters"},
		{"unknown field", "POST", "/assassinate", jsonType, bearer, `{"ids":[0]}`, "", 400, "bad_body"},
		{"not an object", "POST", "/leave", jsonType, bearer, `leave`, "", 400, "bad_body"},
		{"body too large", "POST", "/leave", jsonType, bearer, `{"x":"` + strings.Repeat("a", 8<<10) + `"}`, "", 413, "bad_body"},
		{"DNS rebinding", "GET", "/status", "", "", "", "evil.example.com", 403, "non_loopback_host"},
		{"wrong token on a read", "GET", "/members", "", "Bearer nope", "", "", 401, "wrong_token"},
	} {
		code, body := adminRequest(t, tc.method, base+tc.path, tc.ctype, tc.auth, tc.body, tc.host)
		if code != tc.code || !strings.Contains(body, tc.reason) {
			t.Errorf("%s: %d %q, want %d naming %s", tc.name, code, body, tc.code, tc.reason)
		}
	}
	ref := a.Refused()
	for reason, want := range map[string]uint64{"missing_token": 3, "wrong_token": 3, "not_json": 2, "wrong_method": 3,
		"query_parameters": 1, "bad_body": 3, "non_loopback_host": 1} {
		if ref[reason] != want {
			t.Errorf("refused %s: %d, want %d (all: %v)", reason, ref[reason], want, ref)
		}
	}
	if st := memberStatus(c.nodes[0], 0).Status; st != MemberUp {
		t.Fatalf("after the refused requests p0 is %s", st)
	}

	// The right requests.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	anon := &AdminClient{Addr: a.Addr().String()}
	if st, err := anon.Status(ctx); err != nil || st.ID != 0 {
		t.Fatalf("status on loopback without a token: %+v %v", st, err)
	}
	if code, body := adminRequest(t, "GET", base+"/status", "", "", "", "localhost:1"); code != 200 {
		t.Fatalf("status naming localhost: %d %s", code, body)
	}
	if _, err := anon.Post(ctx, "/leave", struct{}{}); err == nil || !strings.Contains(err.Error(), "missing_token") {
		t.Fatalf("leave without a token: %v", err)
	}
	admin := &AdminClient{Addr: a.Addr().String(), Token: []byte(testToken)}
	if _, err := admin.Members(ctx); err != nil {
		t.Fatalf("members with the token: %v", err)
	}
	if out, err := admin.Post(ctx, "/leave", struct{}{}); err != nil || !strings.Contains(out, "leaving") {
		t.Fatalf("leave with the token: %q %v", out, err)
	}
	waitUntil(t, 5*time.Second, "p0 to announce LEFT", func() bool { return memberStatus(c.nodes[0], 0).Status == MemberLeft })
}

// TestAdminWithoutToken: a loopback endpoint without a token serves the
// reads and refuses every mutating request, with or without a token.
func TestAdminWithoutToken(t *testing.T) {
	c := newCluster(t, 1, 1, gossipTune)
	a, err := ServeAdmin(c.nodes[0], "127.0.0.1:0", AdminOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if _, err := (&AdminClient{Addr: a.Addr().String()}).Members(ctx); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", testToken} {
		_, err := (&AdminClient{Addr: a.Addr().String(), Token: []byte(tok)}).Post(ctx, "/leave", struct{}{})
		if err == nil || !strings.Contains(err.Error(), "no_token_configured") {
			t.Errorf("leave with token %q: %v, want no_token_configured", tok, err)
		}
	}
	if st := memberStatus(c.nodes[0], 0).Status; st != MemberUp {
		t.Fatalf("p0 is %s", st)
	}
}

// TestAdminNotLoopback: an endpoint other machines can reach needs a
// token to start, and then the token for every request.
func TestAdminNotLoopback(t *testing.T) {
	c := newCluster(t, 1, 1, nil)
	if a, err := ServeAdmin(c.nodes[0], "0.0.0.0:0", AdminOptions{}); err == nil {
		a.Close()
		t.Fatal("a non-loopback admin endpoint without a token started")
	} else if !strings.Contains(err.Error(), "set admin_token_file") {
		t.Fatalf("error %q does not say what to do", err)
	}
	a, err := ServeAdmin(c.nodes[0], "0.0.0.0:0", AdminOptions{Token: []byte(testToken)})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	u := url.URL{Scheme: "http", Host: "127.0.0.1:" + strings.TrimPrefix(a.Addr().String()[strings.LastIndex(a.Addr().String(), ":"):], ":"), Path: "/status"}
	if code, body := adminRequest(t, "GET", u.String(), "", "", "", ""); code != 401 || !strings.Contains(body, "missing_token") {
		t.Fatalf("status without a token: %d %s", code, body)
	}
	if code, body := adminRequest(t, "GET", u.String(), "", "Bearer "+testToken, "", ""); code != 200 {
		t.Fatalf("status with the token: %d %s", code, body)
	}
}
