package config

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

func writeToken(t *testing.T, mode os.FileMode, token string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "admin.token")
	if err := os.WriteFile(path, []byte(token), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil { // past the umask
		t.Fatal(err)
	}
	return path
}

func wantFieldError(t *testing.T, text, field, msgPart string) {
	t.Helper()
	_, err := Parse(text, Agent)
	var fe *FieldError
	if !errors.As(err, &fe) || fe.Field != field || !strings.Contains(fe.Msg, msgPart) {
		t.Errorf("got %v, want a FieldError naming %s containing %q\n%s", err, field, msgPart, text)
	}
}

func TestAdminToken(t *testing.T) {
	good := writeToken(t, 0o600, "  0123456789abcdef0123456789abcdef\n")
	c, err := Parse("admin = \"0.0.0.0:7200\"\nadmin_token_file = "+strconv.Quote(good)+"\n"+minimal, Agent)
	if err != nil {
		t.Fatal(err)
	}
	if string(c.AdminToken()) != "0123456789abcdef0123456789abcdef" {
		t.Fatalf("token %q", c.AdminToken())
	}
	if back, err := Parse(c.Format(), Agent); err != nil || string(back.AdminToken()) != string(c.AdminToken()) {
		t.Fatalf("round trip: %v", err)
	}
	if d, _ := Parse(minimal, Agent); d.AdminToken() != nil || d.DeliveryLog != "" ||
		d.DeliveryLogMaxBytes != DefaultDeliveryLogMaxBytes || d.DeliveryLogFiles != DefaultDeliveryLogFiles {
		t.Fatalf("defaults: token %q, delivery log %q %d %d", d.AdminToken(), d.DeliveryLog, d.DeliveryLogMaxBytes, d.DeliveryLogFiles)
	}
	for _, tc := range []struct {
		path, msg string
	}{
		{writeToken(t, 0o644, "0123456789abcdef0123456789abcdef"), "mode 0644"},
		{writeToken(t, 0o640, "0123456789abcdef0123456789abcdef"), "chmod 600"},
		{writeToken(t, 0o600, "short"), "token of 5 bytes"},
		{filepath.Join(t.TempDir(), "missing"), "no such file"},
	} {
		wantFieldError(t, "admin_token_file = "+strconv.Quote(tc.path)+"\n"+minimal, "admin_token_file", tc.msg)
	}
}

func TestAdminAddress(t *testing.T) {
	tok := "admin_token_file = " + strconv.Quote(writeToken(t, 0o600, "0123456789abcdef0123456789abcdef")) + "\n"
	for _, addr := range []string{"127.0.0.1:7200", "[::1]:7200", "localhost:7200", "127.0.0.1:0"} {
		if _, err := Parse("admin = "+strconv.Quote(addr)+"\n"+minimal, Agent); err != nil {
			t.Errorf("admin %s without a token: %v", addr, err)
		}
	}
	// Not loopback: only with a token.
	for _, addr := range []string{"0.0.0.0:7200", ":7200", "10.1.2.3:7200", "[::]:7200", "example.com:7200"} {
		wantFieldError(t, "admin = "+strconv.Quote(addr)+"\n"+minimal, "admin", "needs admin_token_file")
		if _, err := Parse("admin = "+strconv.Quote(addr)+"\n"+tok+minimal, Agent); err != nil {
			t.Errorf("admin %s with a token: %v", addr, err)
		}
	}
	// The node's own ports (listen and client_addr default to 127.0.0.1:7001).
	for _, tc := range []struct{ extra, key string }{
		{`admin = "127.0.0.1:7001"`, "listen"},
		{`admin = "localhost:7001"`, "listen"},
		{"admin = \"0.0.0.0:7001\"\n" + tok, "listen"},
		{"listen = \"0.0.0.0:7001\"\nadmin = \"127.0.0.1:7001\"", "listen"},
		{"listen = \"127.0.0.1:7301\"\nadmin = \"127.0.0.1:7001\"", "client_addr"},
	} {
		wantFieldError(t, tc.extra+"\n"+minimal, "admin", "node's "+tc.key+" address")
	}
	if _, err := Parse("admin = \"127.0.0.1:7002\"\n"+minimal, Agent); err != nil {
		t.Errorf("another node's port on this machine is not this node's: %v", err)
	}
}

func TestDeliveryLogKeys(t *testing.T) {
	// The sample documents every key of this block.
	for _, key := range []string{"# admin_token_file =", "# delivery_log =", "\ndelivery_log_max_bytes =", "\ndelivery_log_files ="} {
		if !strings.Contains(Sample, key) {
			t.Errorf("sample lacks %q", key)
		}
	}
	c, err := Parse("delivery_log = \"/tmp/d.jsonl\"\ndelivery_log_max_bytes = 4096\ndelivery_log_files = 2\n"+minimal, Agent)
	if err != nil || c.DeliveryLog != "/tmp/d.jsonl" || c.DeliveryLogMaxBytes != 4096 || c.DeliveryLogFiles != 2 {
		t.Fatalf("%+v %v", c, err)
	}
	wantFieldError(t, "delivery_log_max_bytes = 100\n"+minimal, "delivery_log_max_bytes", "between 4096")
	wantFieldError(t, "delivery_log_files = 0\n"+minimal, "delivery_log_files", "between 1 and 1000")
}
