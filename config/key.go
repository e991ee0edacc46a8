package config

import (
	"bytes"
	"fmt"
	"os"

	"github.com/weft-dev/weft/transport"
)

// validateKey reads the cluster key file, if one is named, and checks the
// key's length.
func (c *Config) validateKey() error {
	c.key = nil
	if c.ClusterKeyFile == "" {
		return nil
	}
	b, err := ReadClusterKey(c.ClusterKeyFile)
	if err != nil {
		return &FieldError{Field: "cluster_key_file", Msg: err.Error()}
	}
	c.key = b
	return nil
}

// ReadClusterKey reads a cluster key file: its contents without
// surrounding white space, transport.MinKeyLen to MaxKeyLen bytes.
func ReadClusterKey(path string) ([]byte, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	b = bytes.TrimSpace(b)
	if len(b) < transport.MinKeyLen || len(b) > transport.MaxKeyLen {
		return nil, fmt.Errorf("%s holds a key of %d bytes (after trimming white space), want %d to %d",
			path, len(b), transport.MinKeyLen, transport.MaxKeyLen)
	}
	return b, nil
}

// ClusterKey returns the cluster key read from ClusterKeyFile, or nil.
func (c *Config) ClusterKey() []byte { return c.key }
