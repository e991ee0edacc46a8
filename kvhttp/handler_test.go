package kvhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/rsm"
	"github.com/weft-dev/weft/wire"
)

type doFunc = func(context.Context, kv.Command, kv.Consistency) (kv.Result, wire.Timestamp, error)

// storeDo is a kv.Client's DoAt answered by one in-memory shard: the
// handler's own logic, without a cluster. A get that is not Ordered is a
// query (kv.Store.Query) at the applied position; everything else is
// applied at the next position.
func storeDo(t *testing.T) doFunc {
	s, err := kv.NewStore(0, 1)
	if err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var seq uint64
	return func(_ context.Context, c kv.Command, level kv.Consistency) (kv.Result, wire.Timestamp, error) {
		if err := c.Check(); err != nil {
			return kv.Result{}, wire.Timestamp{}, err
		}
		mu.Lock()
		defer mu.Unlock()
		var raw []byte
		if c.Op == kv.OpGet && level != kv.Ordered {
			raw, _ = s.Query(c.Encode(nil))
		} else {
			seq++
			res, err := s.Apply([]rsm.Entry{{ID: wire.MsgID{Client: 100, Seq: seq}, Dest: []wire.GroupID{0},
				Payload: c.Encode(nil), GTS: wire.Timestamp{T: seq}}})
			if err != nil {
				return kv.Result{}, wire.Timestamp{}, err
			}
			raw = res[0]
		}
		r, err := kv.DecodeResult(raw)
		if err == nil && r.Status == kv.StatusError { // one shard: every checked command is its own
			err = fmt.Errorf("the shard refused %s %q: %s", c.Op, c.Key, r.Value)
		}
		return r, wire.Timestamp{T: seq}, err
	}
}

// httpCall is one request to the API and what it should answer.
type httpCall struct {
	method, path, body string
	header             map[string]string
	status             int
	class              string // the error class, or ""
	value              string // a GET's value, if want is set
}

func doHTTP(t *testing.T, url string, c httpCall) (*http.Response, Response, []byte) {
	t.Helper()
	req, err := http.NewRequest(c.method, url+c.path, strings.NewReader(c.body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range c.header {
		if k == "Host" {
			req.Host = v
			continue
		}
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	var out Response
	if resp.Header.Get("Content-Type") == "application/json" {
		if err := json.Unmarshal(raw, &out); err != nil {
			t.Fatalf("%s %s: %v in %q", c.method, c.path, err, raw)
		}
	}
	return resp, out, raw
}

// check runs calls in order against url.
func checkCalls(t *testing.T, url string, calls []httpCall) {
	t.Helper()
	for _, c := range calls {
		resp, out, raw := doHTTP(t, url, c)
		what := fmt.Sprintf("%s %.60s", c.method, c.path)
		if resp.StatusCode != c.status || out.Class != c.class {
			t.Errorf("%s: %d %q, want %d %q: %s", what, resp.StatusCode, out.Class, c.status, c.class, raw)
			continue
		}
		if c.status >= 400 && out.Error == "" {
			t.Errorf("%s: status %d without an error message: %s", what, resp.StatusCode, raw)
		}
		if c.value != "" && (out.Value == nil || *out.Value != c.value) {
			t.Errorf("%s: value %s, want %q", what, raw, c.value)
		}
	}
}

func jsonHeader() map[string]string { return map[string]string{"Content-Type": "application/json"} }

// TestHTTPConsistency: ?consistency= picks a GET's level (linearizable by
// default), which the answer names with the position it read; a level that
// does not exist, or one on a write, is refused (400 bad_consistency).
func TestHTTPConsistency(t *testing.T) {
	srv := httptest.NewServer(newHandler(storeDo(t), Options{}))
	defer srv.Close()
	checkCalls(t, srv.URL, []httpCall{
		{method: "PUT", path: "/v1/kv/a", body: "1", status: 200},
		{method: "PUT", path: "/v1/kv/a?consistency=local", body: "1", status: 400, class: "bad_consistency"},
		{method: "GET", path: "/v1/kv/a?consistency=eventual", status: 400, class: "bad_consistency"},
		{method: "GET", path: "/v1/kv/b?consistency=local", status: 404, class: "not_found"},
	})
	for _, c := range []struct{ query, level, index string }{
		{"", "linearizable", "1.g0"},
		{"?consistency=linearizable", "linearizable", "1.g0"},
		{"?consistency=local", "local", "1.g0"},
		{"?consistency=ordered", "ordered", "2.g0"}, // a multicast: the next position
	} {
		resp, out, raw := doHTTP(t, srv.URL, httpCall{method: "GET", path: "/v1/kv/a" + c.query})
		if resp.StatusCode != 200 || out.Value == nil || *out.Value != "1" || out.Consistency != c.level || out.Index != c.index {
			t.Errorf("GET %q: %d %s, want value 1 read %s at %s", c.query, resp.StatusCode, raw, c.level, c.index)
		}
	}
}

// TestHTTPAPI: every call and refusal of the API over one in-memory
// shard: status codes, error classes, value encodings, keys with '/' and
// percent escapes, the limits.
func TestHTTPAPI(t *testing.T) {
	srv := httptest.NewServer(newHandler(storeDo(t), Options{}))
	defer srv.Close()
	big := strings.Repeat("v", kv.MaxValueBytes)
	longKey := strings.Repeat("k", kv.MaxKeyBytes)
	checkCalls(t, srv.URL, []httpCall{
		{method: "GET", path: "/v1/kv/color", status: 404, class: "not_found"},
		{method: "PUT", path: "/v1/kv/color", body: "blue", status: 200},
		{method: "GET", path: "/v1/kv/color", status: 200, value: "blue"},
		{method: "POST", path: "/v1/kv/color/cas", body: `{"expect":"blue","value":"green"}`, status: 415, class: "not_json"},
		{method: "POST", path: "/v1/kv/color/cas", body: `{"expect":"blue","value":"green"}`, header: jsonHeader(), status: 200},
		{method: "POST", path: "/v1/kv/color/cas", body: `{"expect":"blue","value":"red"}`, header: jsonHeader(), status: 409, class: "cas_failed", value: "green"},
		{method: "POST", path: "/v1/kv/color/cas", body: `{"expect_absent":true,"value":"red"}`, header: jsonHeader(), status: 409, class: "cas_failed", value: "green"},
		{method: "POST", path: "/v1/kv/fresh/cas", body: `{"expect_absent":true,"value_base64":"MQ=="}`, header: jsonHeader(), status: 200},
		{method: "GET", path: "/v1/kv/fresh", status: 200, value: "1"},
		{method: "POST", path: "/v1/kv/fresh/cas", body: `{"expect_base64":"MQ==","value":""}`, header: jsonHeader(), status: 200},
		{method: "DELETE", path: "/v1/kv/fresh", status: 200},
		{method: "DELETE", path: "/v1/kv/fresh", status: 404, class: "not_found"},
		{method: "POST", path: "/v1/kv/fresh/cas", body: `{"expect":"","value":"x"}`, header: jsonHeader(), status: 409, class: "cas_failed"},
		// A key holding '/', a percent escape, and one ending in "/cas".
		{method: "PUT", path: "/v1/kv/a%2Fb/c%20d", body: "slash", status: 200},
		{method: "GET", path: "/v1/kv/a/b/c%20d", status: 200, value: "slash"},
		{method: "PUT", path: "/v1/kv/x/cas", body: "odd", status: 200},
		{method: "POST", path: "/v1/kv/x/cas/cas", body: `{"expect":"odd","value":"even"}`, header: jsonHeader(), status: 200},
		{method: "GET", path: "/v1/kv/x/cas", status: 200, value: "even"},
		// Limits: at the limit it goes through, past it 400.
		{method: "PUT", path: "/v1/kv/" + longKey, body: big, status: 200},
		{method: "GET", path: "/v1/kv/" + longKey, status: 200, value: big},
		{method: "PUT", path: "/v1/kv/" + longKey + "k", body: "v", status: 400, class: "key_too_large"},
		{method: "PUT", path: "/v1/kv/big", body: big + "v", status: 400, class: "value_too_large"},
		{method: "GET", path: "/v1/kv/", status: 400, class: "empty_key"},
		{method: "POST", path: "/v1/kv/big/cas", body: `{"expect_absent":true,"value":"` + big + `v"}`, header: jsonHeader(), status: 400, class: "value_too_large"},
		{method: "POST", path: "/v1/kv/big/cas", body: `{"expect_absent":true,"value":"` + strings.Repeat(big, 4) + `"}`, header: jsonHeader(), status: 400, class: "value_too_large"},
		// Malformed compare-and-sets.
		{method: "POST", path: "/v1/kv/c/cas", body: `{"expect":"a","expect_absent":true,"value":"b"}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `{"value":"b"}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `{"expect_absent":true}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `{"expect_absent":true,"value":"b","value_base64":"Yg=="}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `{"expect_absent":true,"value_base64":"!!"}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `{"expect_absent":true,"value":"b","extra":1}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `{"expect_absent":true,"value":"b"} {}`, header: jsonHeader(), status: 400, class: "bad_body"},
		{method: "POST", path: "/v1/kv/c/cas", body: `[`, header: jsonHeader(), status: 400, class: "bad_body"},
		// Methods and paths.
		{method: "PATCH", path: "/v1/kv/color", status: 405, class: "wrong_method"},
		{method: "POST", path: "/v1/kv/color", body: "{}", header: jsonHeader(), status: 405, class: "wrong_method"},
		{method: "GET", path: "/v2/kv/color", status: 404, class: "no_such_endpoint"},
		// Without a token, only loopback names are answered.
		{method: "GET", path: "/v1/kv/color", header: map[string]string{"Host": "rebound.example:80"}, status: 403, class: "non_loopback_host"},
		{method: "GET", path: "/v1/kv/color", header: map[string]string{"Host": "localhost"}, status: 200, value: "green"},
	})
	// Values as stored, not HTML-escaped.
	checkCalls(t, srv.URL, []httpCall{{method: "PUT", path: "/v1/kv/html", body: "<b>&</b>", status: 200}})
	if _, _, raw := doHTTP(t, srv.URL, httpCall{method: "GET", path: "/v1/kv/html"}); !bytes.Contains(raw, []byte(`"value":"<b>&</b>"`)) {
		t.Errorf("html value: %s", raw)
	}

	// A binary value: no "value", the bytes in value_base64; the raw bytes
	// with Accept: application/octet-stream.
	bin := "\xff\x00\xfe"
	checkCalls(t, srv.URL, []httpCall{{method: "PUT", path: "/v1/kv/bin", body: bin, status: 200}})
	_, out, raw := doHTTP(t, srv.URL, httpCall{method: "GET", path: "/v1/kv/bin"})
	if out.Value != nil || out.ValueBase64 == nil || *out.ValueBase64 != "/wD+" || out.Found == nil || !*out.Found {
		t.Errorf("binary value: %s", raw)
	}
	resp, _, raw := doHTTP(t, srv.URL, httpCall{method: "GET", path: "/v1/kv/bin", header: map[string]string{"Accept": "application/octet-stream"}})
	if resp.Header.Get("Content-Type") != "application/octet-stream" || string(raw) != bin {
		t.Errorf("raw value: %q %q", resp.Header.Get("Content-Type"), raw)
	}
	resp, _, _ = doHTTP(t, srv.URL, httpCall{method: "PATCH", path: "/v1/kv/bin"})
	if resp.Header.Get("Allow") != "GET, PUT, DELETE, POST" {
		t.Errorf("405 without the Allow header: %q", resp.Header.Get("Allow"))
	}
}

// TestHTTPToken: with a token every request needs it (on any Host).
func TestHTTPToken(t *testing.T) {
	const tok = "0123456789abcdef0123456789abcdef"
	h := newHandler(storeDo(t), Options{Token: []byte(tok)})
	srv := httptest.NewServer(h)
	defer srv.Close()
	bearer := func(s string) map[string]string {
		return map[string]string{"Authorization": "Bearer " + s, "Host": "kv.example"}
	}
	checkCalls(t, srv.URL, []httpCall{
		{method: "PUT", path: "/v1/kv/k", body: "v", status: 401, class: "missing_token"},
		{method: "GET", path: "/v1/kv/k", header: map[string]string{"Authorization": tok}, status: 401, class: "missing_token"},
		{method: "GET", path: "/v1/kv/k", header: bearer(tok + "x"), status: 401, class: "wrong_token"},
		{method: "GET", path: "/v2/k", header: bearer("x"), status: 401, class: "wrong_token"},
		{method: "PUT", path: "/v1/kv/k", body: "v", header: bearer(tok), status: 200},
		{method: "GET", path: "/v1/kv/k", header: bearer(tok), status: 200, value: "v"},
	})
	resp, _, _ := doHTTP(t, srv.URL, httpCall{method: "GET", path: "/v1/kv/k"})
	if !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
		t.Errorf("401 without WWW-Authenticate: %q", resp.Header.Get("WWW-Authenticate"))
	}
	if f := h.Failures(); f["missing_token"] != 3 || f["wrong_token"] != 2 {
		t.Errorf("failures counted: %v", f)
	}
}

// TestHTTPClientErrors: the kv client's errors map to their statuses and
// classes; the deadline is the API's own.
func TestHTTPClientErrors(t *testing.T) {
	for _, tc := range []struct {
		err    error
		status int
		class  string
	}{
		{fmt.Errorf("wrapped: %w", client.ErrOverloaded), 503, "overloaded"},
		{fmt.Errorf("wrapped: %w", client.ErrReadFailed), 502, "read_failed"},
		{client.ErrSessionExpired, 410, "session_expired"},
		{client.ErrClosed, 503, "unavailable"},
		{fmt.Errorf("%w: x", kv.ErrResultLost), 503, "result_lost"},
		{fmt.Errorf("%w: x", kv.ErrWrongShard), 502, "wrong_shard"},
		{fmt.Errorf("%w: x", kv.ErrBadCommand), 502, "bad_command"},
		{errors.New("something else"), 500, "internal"},
		{nil, 504, "timeout"}, // nil: wait for the deadline
	} {
		do := func(ctx context.Context, _ kv.Command, _ kv.Consistency) (kv.Result, wire.Timestamp, error) {
			if tc.err == nil {
				<-ctx.Done()
				return kv.Result{}, wire.Timestamp{}, ctx.Err()
			}
			return kv.Result{}, wire.Timestamp{}, tc.err
		}
		srv := httptest.NewServer(newHandler(do, Options{Timeout: 1}))
		resp, out, raw := doHTTP(t, srv.URL, httpCall{method: "GET", path: "/v1/kv/k"})
		srv.Close()
		if resp.StatusCode != tc.status || out.Class != tc.class || out.Error == "" {
			t.Errorf("%v: %d %s, want %d %q", tc.err, resp.StatusCode, raw, tc.status, tc.class)
		}
		if tc.status == 503 && resp.Header.Get("Retry-After") == "" {
			t.Errorf("%v: 503 without Retry-After", tc.err)
		}
	}
}

// TestHTTPMaxRequests drives the bound on requests in progress to its
// limit: with MaxRequests held by requests the cluster has not answered,
// the next is refused at once (503 busy); once they are answered, a
// request goes through again.
func TestHTTPMaxRequests(t *testing.T) {
	const max = 3
	entered, release := make(chan struct{}), make(chan struct{})
	inner := storeDo(t)
	do := func(ctx context.Context, c kv.Command, level kv.Consistency) (kv.Result, wire.Timestamp, error) {
		if c.Key == "slow" && c.Op == kv.OpPut {
			entered <- struct{}{}
			<-release
		}
		return inner(ctx, c, level)
	}
	h := newHandler(do, Options{MaxRequests: max})
	srv := httptest.NewServer(h)
	defer srv.Close()
	var wg sync.WaitGroup
	codes := make(chan int, max)
	for range max {
		wg.Go(func() {
			resp, _, _ := doHTTP(t, srv.URL, httpCall{method: "PUT", path: "/v1/kv/slow", body: "x"})
			codes <- resp.StatusCode
		})
	}
	for range max {
		<-entered
	}
	checkCalls(t, srv.URL, []httpCall{
		{method: "GET", path: "/v1/kv/other", status: 503, class: "busy"},
		{method: "PUT", path: "/v1/kv/other", body: "x", status: 503, class: "busy"},
	})
	close(release)
	wg.Wait()
	close(codes)
	for c := range codes {
		if c != 200 {
			t.Errorf("a held request ended with %d", c)
		}
	}
	checkCalls(t, srv.URL, []httpCall{{method: "GET", path: "/v1/kv/slow", status: 200, value: "x"}})
	if f := h.Failures(); f["busy"] != 2 {
		t.Errorf("busy refusals counted: %v", f)
	}
}

// TestListenRefusesOpenAddress: an address other machines reach
// needs a token.
func TestListenRefusesOpenAddress(t *testing.T) {
	if _, err := Listen("0.0.0.0:0", nil, Options{}); err == nil || !strings.Contains(err.Error(), "no token") {
		t.Fatalf("0.0.0.0 without a token: %v", err)
	}
	s, err := Listen("127.0.0.1:0", nil, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Listen("0.0.0.0:0", nil, Options{Token: bytes.Repeat([]byte("t"), 16)})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
}
