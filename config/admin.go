package config

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"strconv"
	"strings"

	"github.com/BurntSushi/toml"
)

// Admin token and deliveries log defaults and limits.
const (
	MinAdminToken              = 16
	MaxAdminToken              = 1024
	DefaultDeliveryLogMaxBytes = 64 << 20
	MinDeliveryLogBytes        = 4 << 10
	MaxDeliveryLogBytes        = 1 << 30
	DefaultDeliveryLogFiles    = 4
	MaxDeliveryLogFiles        = 1000
)

func (c *Config) setAdminDefaults(md toml.MetaData) {
	if !md.IsDefined("delivery_log_max_bytes") {
		c.DeliveryLogMaxBytes = DefaultDeliveryLogMaxBytes
	}
	if !md.IsDefined("delivery_log_files") {
		c.DeliveryLogFiles = DefaultDeliveryLogFiles
	}
}

// validateAdmin checks the admin endpoint against the node's other
// addresses and its token, and the deliveries log's bounds (agent keys).
func (c *Config) validateAdmin() error {
	var err error
	if c.adminToken, err = readTokenKey("admin_token_file", c.AdminTokenFile); err != nil {
		return err
	}
	if c.Admin != "" {
		// One port, one purpose: an admin endpoint on the node's own
		// address would take the port from the transport (or the other
		// way round) and mix operator and peer traffic.
		for _, o := range []struct{ key, addr string }{{"listen", c.Listen}, {"client_addr", c.ClientAddr}} {
			if sameEndpoint(c.Admin, o.addr) {
				return &FieldError{Field: "admin", Msg: fmt.Sprintf("%q is the node's %s address (%q); give the admin endpoint a port of its own", c.Admin, o.key, o.addr)}
			}
		}
		if !IsLoopback(c.Admin) && c.adminToken == nil {
			return &FieldError{Field: "admin", Msg: fmt.Sprintf("%q is not a loopback address: an admin endpoint reachable from other machines needs admin_token_file", c.Admin)}
		}
	}
	if c.DeliveryLogMaxBytes < MinDeliveryLogBytes || c.DeliveryLogMaxBytes > MaxDeliveryLogBytes {
		return &FieldError{Field: "delivery_log_max_bytes", Msg: fmt.Sprintf("must be between %d and %d bytes, got %d", MinDeliveryLogBytes, MaxDeliveryLogBytes, c.DeliveryLogMaxBytes)}
	}
	if c.DeliveryLogFiles < 1 || c.DeliveryLogFiles > MaxDeliveryLogFiles {
		return &FieldError{Field: "delivery_log_files", Msg: fmt.Sprintf("must be between 1 and %d, got %d", MaxDeliveryLogFiles, c.DeliveryLogFiles)}
	}
	return nil
}

// ReadAdminToken reads an admin token file: its contents without
// surrounding white space, MinAdminToken to MaxAdminToken bytes. A file
// that group or others may read is refused: the token lets its holder
// make the node leave the cluster (and kv.token_file's, write the store).
func ReadAdminToken(path string) ([]byte, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return nil, fmt.Errorf("%s has mode %04o: a token file must not be accessible by group or others (chmod 600 %s)", path, perm, path)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < MinAdminToken || len(b) > MaxAdminToken {
		return nil, fmt.Errorf("%s holds a token of %d bytes (after trimming white space), want %d to %d",
			path, len(b), MinAdminToken, MaxAdminToken)
	}
	return b, nil
}

// readTokenKey reads the token file a key names with ReadAdminToken's
// rules (nil for an empty path).
func readTokenKey(field, path string) ([]byte, error) {
	if path == "" {
		return nil, nil
	}
	tok, err := ReadAdminToken(path)
	if err != nil {
		return nil, &FieldError{Field: field, Msg: err.Error()}
	}
	return tok, nil
}

// AdminToken returns the token read from AdminTokenFile, or nil.
func (c *Config) AdminToken() []byte { return c.adminToken }

// IsLoopback reports whether the host of addr (host:port) is a loopback
// address: an IP in 127.0.0.0/8 or ::1, or "localhost". An empty host
// (all interfaces) and any other name are not.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// sameEndpoint reports whether two host:port addresses would claim the
// same port on this machine: the same port, and the same host, or one of
// them all interfaces, or both loopback.
func sameEndpoint(a, b string) bool {
	ha, pa, err1 := net.SplitHostPort(a)
	hb, pb, err2 := net.SplitHostPort(b)
	if err1 != nil || err2 != nil || pa != pb || pa == "0" {
		return false
	}
	wildcard := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || (ip != nil && ip.IsUnspecified())
	}
	return strings.EqualFold(ha, hb) || wildcard(ha) || wildcard(hb) || (IsLoopback(a) && IsLoopback(b))
}

func (c *Config) formatAdmin(sb *strings.Builder) {
	q := strconv.Quote
	if c.AdminTokenFile != "" {
		fmt.Fprintf(sb, "admin_token_file = %s\n", q(c.AdminTokenFile))
	}
	if c.DeliveryLog != "" {
		fmt.Fprintf(sb, "delivery_log = %s\n", q(c.DeliveryLog))
	}
	// Zero (a Config built in code): the default.
	if c.DeliveryLogMaxBytes != 0 {
		fmt.Fprintf(sb, "delivery_log_max_bytes = %d\n", c.DeliveryLogMaxBytes)
	}
	if c.DeliveryLogFiles != 0 {
		fmt.Fprintf(sb, "delivery_log_files = %d\n", c.DeliveryLogFiles)
	}
}
