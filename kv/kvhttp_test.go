package kv_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/kvhttp"
)

// kvAPI calls an HTTP API with its token.
type kvAPI struct {
	url, token string
}

// call sends one request and decodes the JSON answer.
func (a kvAPI) call(t *testing.T, method, key, body string) (int, kvhttp.Response) {
	path := a.url + kvhttp.Prefix + key
	if method == http.MethodPost {
		path += "/cas"
	}
	req, err := http.NewRequest(method, path, strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return 0, kvhttp.Response{}
	}
	if a.token != "" {
		req.Header.Set("Authorization", "Bearer "+a.token)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return 0, kvhttp.Response{}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	var out kvhttp.Response
	if err == nil {
		err = json.Unmarshal(raw, &out)
	}
	if err != nil {
		t.Errorf("%s %s: %v in %q", method, key, err, raw)
	}
	return resp.StatusCode, out
}

// want checks a call's status, error class and (if value != nil) value.
func (a kvAPI) want(t *testing.T, method, key, body string, status int, class string, value *string) {
	t.Helper()
	code, out := a.call(t, method, key, body)
	if code != status || out.Class != class || (value != nil && (out.Value == nil || *out.Value != *value)) {
		t.Errorf("%s %.40s: %d %+v, want %d %q", method, key, code, out, status, class)
	}
}

func ptr(s string) *string { return &s }

// TestHTTPOnCluster (here for startKV; the API is package kvhttp) drives
// the HTTP API over a real 2-shard x 3-replica
// cluster with net/http: put, get, del, compare-and-set, 404, 409, the
// limits, the token and a wrong method; then 8 goroutines increment two
// counters (one per shard) with compare-and-set loops, and the counters
// end exactly at the number of increments.
func TestHTTPOnCluster(t *testing.T) {
	c := startKV(t, 2, 3)
	k := c.client(t, 2)
	const token = "0123456789abcdef0123456789abcdef"
	srv, err := kvhttp.Listen("127.0.0.1:0", k, kvhttp.Options{Token: []byte(token), Timeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer srv.Close()
	api := kvAPI{url: "http://" + srv.Addr().String(), token: token}

	kvAPI{url: api.url}.want(t, "GET", "color", "", 401, "missing_token", nil)
	kvAPI{url: api.url, token: token + "x"}.want(t, "PUT", "color", "blue", 401, "wrong_token", nil)
	api.want(t, "GET", "color", "", 404, "not_found", nil)
	api.want(t, "PUT", "color", "blue", 200, "", nil)
	api.want(t, "GET", "color", "", 200, "", ptr("blue"))
	api.want(t, "POST", "color", `{"expect":"blue","value":"green"}`, 200, "", nil)
	api.want(t, "POST", "color", `{"expect":"blue","value":"red"}`, 409, "cas_failed", ptr("green"))
	api.want(t, "POST", "fresh", `{"expect_absent":true,"value":"1"}`, 200, "", nil)
	api.want(t, "POST", "fresh", `{"expect_absent":true,"value":"2"}`, 409, "cas_failed", ptr("1"))
	api.want(t, "DELETE", "fresh", "", 200, "", nil)
	api.want(t, "DELETE", "fresh", "", 404, "not_found", nil)
	api.want(t, "GET", "fresh", "", 404, "not_found", nil)
	api.want(t, "PATCH", "color", "", 405, "wrong_method", nil)
	big := strings.Repeat("v", kv.MaxValueBytes)
	api.want(t, "PUT", "big", big, 200, "", nil)
	api.want(t, "GET", "big", "", 200, "", &big)
	api.want(t, "PUT", "big", big+"v", 400, "value_too_large", nil)
	api.want(t, "PUT", strings.Repeat("k", kv.MaxKeyBytes+1), "v", 400, "key_too_large", nil)
	// The API and the Go client see one store.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if v, ok, err := k.Get(ctx, "color"); err != nil || !ok || string(v) != "green" {
		t.Fatalf("the Go client reads color: %q %v %v", v, ok, err)
	}
	if t.Failed() {
		return
	}

	// One counter on each shard.
	var counters []string
	for i := 0; len(counters) < 2; i++ {
		if key := fmt.Sprint("counter", i); int(kv.Shard(key, 2)) == len(counters) {
			counters = append(counters, key)
		}
	}
	const workers, increments = 8, 5
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range increments {
				for _, key := range counters {
					if !increment(t, api, key) {
						t.Errorf("worker %d, increment %d of %s failed", w, i, key)
						return
					}
				}
			}
		})
	}
	wg.Wait()
	for _, key := range counters {
		api.want(t, "GET", key, "", 200, "", ptr(strconv.Itoa(workers*increments)))
	}
}

// increment adds 1 to key's decimal value (absent: 0) with a
// compare-and-set loop.
func increment(t *testing.T, api kvAPI, key string) bool {
	code, out := api.call(t, "GET", key, "")
	body := `{"expect_absent":true,"value":"1"}`
	switch {
	case code == 200 && out.Value != nil:
	case code == 404:
	default:
		t.Errorf("GET %s: %d %+v", key, code, out)
		return false
	}
	for range 1000 {
		if out.Value != nil {
			n, err := strconv.Atoi(*out.Value)
			if err != nil {
				t.Errorf("%s holds %q", key, *out.Value)
				return false
			}
			body = fmt.Sprintf(`{"expect":"%d","value":"%d"}`, n, n+1)
		}
		code, out = api.call(t, "POST", key, body)
		switch {
		case code == 200:
			return true
		case code != 409 || out.Found == nil || !*out.Found:
			t.Errorf("cas %s %s: %d %+v", key, body, code, out)
			return false
		}
	}
	return false
}
