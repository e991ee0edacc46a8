package node

// A minimal Chrome DevTools Protocol client for the dashboard's browser
// test, on the standard library only: a websocket client (RFC 6455,
// client side: masked frames out, fragments and pings in) and
// synchronous CDP calls. Enough to navigate, evaluate and take a
// screenshot; not a general client.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"testing"
	"time"
)

// findChromium returns Debian's chromium (or $WEFT_CHROMIUM), "" if none.
func findChromium() string {
	if p := os.Getenv("WEFT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// browser is a headless chromium with one page attached over CDP.
type browser struct {
	cmd  *exec.Cmd
	page *cdpConn
}

var devtoolsRE = regexp.MustCompile(`DevTools listening on (ws://[^\s]+)`)

// startBrowser launches chromium headless on a fresh profile and attaches
// to its first page; it is killed when the test ends.
func startBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	// The profile is not under t.TempDir: chromium's helper processes may
	// still write to it for a moment after the browser is killed, and
	// TempDir's cleanup fails the test on a directory that is not empty.
	// It is removed best-effort instead.
	profile, err := os.MkdirTemp("", "weft-dashboard-profile-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for range 20 {
			if os.RemoveAll(profile) == nil {
				return
			}
			time.Sleep(50 * time.Millisecond)
		}
	})
	args := []string{"--headless=new", "--disable-gpu", "--no-first-run", "--no-default-browser-check",
		"--disable-extensions", "--disable-background-networking", "--disable-component-update", "--disable-sync",
		"--remote-debugging-address=127.0.0.1", "--remote-debugging-port=0",
		"--user-data-dir=" + profile, "--window-size=1280,1200", "about:blank"}
	if os.Geteuid() == 0 {
		args = append(args, "--no-sandbox") // chromium refuses to run as root with its sandbox
	}
	cmd := exec.Command(bin, args...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start %s: %v", bin, err)
	}
	b := &browser{cmd: cmd}
	t.Cleanup(func() {
		if b.page != nil {
			b.page.c.Close()
		}
		cmd.Process.Kill()
		cmd.Wait()
	})
	found := make(chan string, 1)
	var log bytes.Buffer
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if m := devtoolsRE.FindStringSubmatch(sc.Text()); m != nil {
				found <- m[1]
			}
			if log.Len() < 8<<10 {
				log.WriteString(sc.Text() + "\n")
			}
		}
	}()
	var wsURL string
	select {
	case wsURL = <-found:
	case <-time.After(30 * time.Second):
		t.Fatalf("chromium did not announce its DevTools endpoint within 30s")
	}
	u, err := url.Parse(wsURL)
	if err != nil {
		t.Fatal(err)
	}
	// The page targets: /json/list names each one's websocket.
	var targets []struct {
		Type                 string `json:"type"`
		WebSocketDebuggerURL string `json:"webSocketDebuggerUrl"`
	}
	var pageWS string
	for deadline := time.Now().Add(10 * time.Second); ; {
		resp, err := http.Get("http://" + u.Host + "/json/list")
		if err == nil {
			err = json.NewDecoder(resp.Body).Decode(&targets)
			resp.Body.Close()
		}
		for _, tg := range targets {
			if tg.Type == "page" && tg.WebSocketDebuggerURL != "" {
				pageWS = tg.WebSocketDebuggerURL
			}
		}
		if pageWS != "" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no page target in chromium's /json/list (%v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
	conn, err := dialWebsocket(pageWS)
	if err != nil {
		t.Fatalf("attach to the page: %v", err)
	}
	b.page = &cdpConn{c: conn, br: bufio.NewReader(conn)}
	return b
}

// dialWebsocket opens a client websocket (no extensions, no TLS).
func dialWebsocket(raw string) (net.Conn, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, err
	}
	c, err := net.DialTimeout("tcp", u.Host, 5*time.Second)
	if err != nil {
		return nil, err
	}
	var nonce [16]byte
	rand.Read(nonce[:])
	key := base64.StdEncoding.EncodeToString(nonce[:])
	fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n", u.RequestURI(), u.Host, key)
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		c.Close()
		return nil, err
	}
	sum := sha1.Sum([]byte(key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"))
	if resp.StatusCode != http.StatusSwitchingProtocols || resp.Header.Get("Sec-WebSocket-Accept") != base64.StdEncoding.EncodeToString(sum[:]) {
		c.Close()
		return nil, fmt.Errorf("websocket handshake: %s", resp.Status)
	}
	if br.Buffered() > 0 {
		c.Close()
		return nil, errors.New("websocket: data before the first frame")
	}
	c.SetReadDeadline(time.Time{})
	return c, nil
}

// cdpConn is one CDP session over a websocket; calls are synchronous and
// events are discarded.
type cdpConn struct {
	c    net.Conn
	br   *bufio.Reader
	next int64
}

// writeFrame sends one masked frame (RFC 6455 5.3: a client masks all).
func (p *cdpConn) writeFrame(op byte, payload []byte) error {
	hdr := []byte{0x80 | op}
	switch n := len(payload); {
	case n < 126:
		hdr = append(hdr, 0x80|byte(n))
	case n < 1<<16:
		hdr = append(hdr, 0x80|126, byte(n>>8), byte(n))
	default:
		hdr = append(hdr, 0x80|127)
		hdr = binary.BigEndian.AppendUint64(hdr, uint64(n))
	}
	var mask [4]byte
	rand.Read(mask[:])
	hdr = append(hdr, mask[:]...)
	masked := make([]byte, len(payload))
	for i, b := range payload {
		masked[i] = b ^ mask[i%4]
	}
	_, err := p.c.Write(append(hdr, masked...))
	return err
}

// readMessage returns the next text or binary message, answering pings.
func (p *cdpConn) readMessage() ([]byte, error) {
	var msg []byte
	for {
		var h [2]byte
		if _, err := io.ReadFull(p.br, h[:]); err != nil {
			return nil, err
		}
		fin, op, n := h[0]&0x80 != 0, h[0]&0x0f, uint64(h[1]&0x7f)
		switch n {
		case 126:
			var b [2]byte
			if _, err := io.ReadFull(p.br, b[:]); err != nil {
				return nil, err
			}
			n = uint64(binary.BigEndian.Uint16(b[:]))
		case 127:
			var b [8]byte
			if _, err := io.ReadFull(p.br, b[:]); err != nil {
				return nil, err
			}
			n = binary.BigEndian.Uint64(b[:])
		}
		if n > 64<<20 {
			return nil, fmt.Errorf("websocket: a %d-byte frame", n)
		}
		var mask [4]byte
		if h[1]&0x80 != 0 { // servers do not mask, but tolerate it
			if _, err := io.ReadFull(p.br, mask[:]); err != nil {
				return nil, err
			}
		}
		body := make([]byte, n)
		if _, err := io.ReadFull(p.br, body); err != nil {
			return nil, err
		}
		if h[1]&0x80 != 0 {
			for i := range body {
				body[i] ^= mask[i%4]
			}
		}
		switch op {
		case 0x8:
			return nil, errors.New("websocket: closed by the browser")
		case 0x9:
			if err := p.writeFrame(0xA, body); err != nil {
				return nil, err
			}
			continue
		case 0xA:
			continue
		}
		msg = append(msg, body...)
		if fin {
			return msg, nil
		}
	}
}

// call sends a CDP command and waits for its answer.
func (p *cdpConn) call(ctx context.Context, method string, params any, result any) error {
	p.next++
	id := p.next
	req, err := json.Marshal(map[string]any{"id": id, "method": method, "params": params})
	if err != nil {
		return err
	}
	if dl, ok := ctx.Deadline(); ok {
		p.c.SetDeadline(dl)
	}
	defer p.c.SetDeadline(time.Time{})
	if err := p.writeFrame(0x1, req); err != nil {
		return err
	}
	for {
		raw, err := p.readMessage()
		if err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		var resp struct {
			ID     int64           `json:"id"`
			Result json.RawMessage `json:"result"`
			Error  *struct {
				Code    int    `json:"code"`
				Message string `json:"message"`
			} `json:"error"`
		}
		if err := json.Unmarshal(raw, &resp); err != nil {
			return fmt.Errorf("%s: %w", method, err)
		}
		if resp.ID != id {
			continue // an event, or a late answer
		}
		if resp.Error != nil {
			return fmt.Errorf("%s: %d %s", method, resp.Error.Code, resp.Error.Message)
		}
		if result == nil {
			return nil
		}
		return json.Unmarshal(resp.Result, result)
	}
}

// eval evaluates a JavaScript expression in the page and decodes its
// value (JSON-serializable) into out.
func (p *cdpConn) eval(ctx context.Context, expr string, out any) error {
	var r struct {
		Result struct {
			Value json.RawMessage `json:"value"`
		} `json:"result"`
		ExceptionDetails *struct {
			Text      string `json:"text"`
			Exception struct {
				Description string `json:"description"`
			} `json:"exception"`
		} `json:"exceptionDetails"`
	}
	if err := p.call(ctx, "Runtime.evaluate", map[string]any{"expression": expr, "returnByValue": true, "awaitPromise": true}, &r); err != nil {
		return err
	}
	if r.ExceptionDetails != nil {
		return fmt.Errorf("page script: %s %s", r.ExceptionDetails.Text, strings.TrimSpace(r.ExceptionDetails.Exception.Description))
	}
	if out == nil {
		return nil
	}
	return json.Unmarshal(r.Result.Value, out)
}

// screenshot captures the whole page as PNG.
func (p *cdpConn) screenshot(ctx context.Context) ([]byte, error) {
	var r struct {
		Data string `json:"data"`
	}
	if err := p.call(ctx, "Page.captureScreenshot", map[string]any{"format": "png", "captureBeyondViewport": true}, &r); err != nil {
		return nil, err
	}
	return base64.StdEncoding.DecodeString(r.Data)
}
