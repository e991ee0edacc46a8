//go:build !linux || 386

package transport

import "net"

// wrapRaw is the identity outside Linux (rawio_linux.go).
func wrapRaw(c net.Conn) net.Conn { return c }

// tcpOf returns the TCP connection c is, if it is one.
func tcpOf(c net.Conn) (*net.TCPConn, bool) {
	tc, ok := c.(*net.TCPConn)
	return tc, ok
}
