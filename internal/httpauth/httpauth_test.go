package httpauth

import (
	"net/http/httptest"
	"testing"
)

func TestToken(t *testing.T) {
	tok := NewToken([]byte("0123456789abcdef"))
	for _, tc := range []struct {
		header, reason string
	}{
		{"", MissingToken},
		{"0123456789abcdef", MissingToken}, // no "Bearer "
		{"Bearer 0123456789abcdeX", WrongToken},
		{"Bearer x", WrongToken},
		{"Bearer 0123456789abcdef", ""},
		{"Bearer  0123456789abcdef ", ""},
	} {
		r := httptest.NewRequest("GET", "/", nil)
		if tc.header != "" {
			r.Header.Set("Authorization", tc.header)
		}
		w := httptest.NewRecorder()
		reason, ok := tok.Check(w, r, "test")
		if reason != tc.reason || ok != (tc.reason == "") {
			t.Errorf("%q: %q %v, want %q", tc.header, reason, ok, tc.reason)
		}
		if !ok && w.Header().Get("WWW-Authenticate") == "" {
			t.Errorf("%q: refused without WWW-Authenticate", tc.header)
		}
	}
	// No token: nothing matches, not even an empty bearer.
	none := NewToken(nil)
	r := httptest.NewRequest("GET", "/", nil)
	r.Header.Set("Authorization", "Bearer ")
	if none.Set() || !tok.Set() {
		t.Fatal("Set")
	}
	if reason, ok := none.Check(httptest.NewRecorder(), r, "test"); ok || reason != WrongToken {
		t.Errorf("no token accepted a request: %q", reason)
	}
}

func TestLoopbackHost(t *testing.T) {
	for host, want := range map[string]bool{
		"localhost": true, "LOCALHOST:80": true, "127.0.0.1": true, "127.1.2.3:7480": true, "[::1]:7480": true, "::1": true,
		"": false, "example.com": false, "localhost.example.com:80": false, "10.0.0.1:7480": false, "[::]:80": false, "0.0.0.0": false,
	} {
		if got := LoopbackHost(host); got != want {
			t.Errorf("%q: %v, want %v", host, got, want)
		}
	}
}
