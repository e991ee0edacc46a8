package kvhttp

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"net/http"

	"github.com/weft-dev/weft/kv"
	"github.com/weft-dev/weft/wire"
)

// Transactions over HTTP (docs/kv-http.md): POST /v1/txn with a TxnRequest.

// TxnPath is the transactions' endpoint.
const TxnPath = "/v1/txn"

// MaxTxnBody bounds a transaction's JSON body: a transaction is at most
// wire.MaxPayload encoded, and its values in base64 take 4/3 of that.
const MaxTxnBody = 2 << 20

// TxnRequest is the JSON body of POST /v1/txn: conditions, reads and
// writes (kv.Txn). Each condition sets exactly one of its tests, each write
// exactly one of its actions; values as a JSON string or in base64.
type TxnRequest struct {
	If    []TxnCond  `json:"if,omitempty"`
	Reads []string   `json:"reads,omitempty"`
	Then  []TxnWrite `json:"then,omitempty"`
}

// TxnCond is one condition: the key holds a value (equal, equal_base64),
// is absent, is present, or holds an integer at least at_least.
type TxnCond struct {
	Key         string  `json:"key"`
	Equal       *string `json:"equal,omitempty"`
	EqualBase64 *string `json:"equal_base64,omitempty"`
	Absent      bool    `json:"absent,omitempty"`
	Present     bool    `json:"present,omitempty"`
	AtLeast     *int64  `json:"at_least,omitempty"`
}

// TxnWrite is one write: put a value (put, put_base64), delete, or add an
// integer.
type TxnWrite struct {
	Key       string  `json:"key"`
	Put       *string `json:"put,omitempty"`
	PutBase64 *string `json:"put_base64,omitempty"`
	Delete    bool    `json:"delete,omitempty"`
	Add       *int64  `json:"add,omitempty"`
}

// TxnResponse answers a transaction: 200 if it committed, 409 if it
// aborted (Failed and BadWrites say why: indexes into the request's if and
// then); Reads as GET answers them, in the request's order.
type TxnResponse struct {
	Committed bool       `json:"committed"`
	GTS       string     `json:"gts,omitempty"`
	Failed    []int      `json:"failed,omitempty"`
	BadWrites []int      `json:"bad_writes,omitempty"`
	Reads     []Response `json:"reads,omitempty"`
	Error     string     `json:"error,omitempty"`
	Class     string     `json:"class,omitempty"`
}

// toTxn checks req and builds its kv.Txn.
func (req *TxnRequest) toTxn() (kv.Txn, error) {
	var t kv.Txn
	for i, c := range req.If {
		n := 0
		for _, set := range []bool{c.Equal != nil, c.EqualBase64 != nil, c.Absent, c.Present, c.AtLeast != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return kv.Txn{}, fmt.Errorf(`if[%d]: give exactly one of "equal", "equal_base64", "absent", "present" and "at_least" (got %d)`, i, n)
		}
		kc := kv.Cond{Key: c.Key}
		switch {
		case c.Absent:
			kc.Kind = kv.CondAbsent
		case c.Present:
			kc.Kind = kv.CondPresent
		case c.AtLeast != nil:
			kc.Kind, kc.Num = kv.CondAtLeast, *c.AtLeast
		default:
			v, err := fieldBytes("equal", c.Equal, c.EqualBase64)
			if err != nil {
				return kv.Txn{}, fmt.Errorf("if[%d]: %v", i, err)
			}
			kc.Kind, kc.Value = kv.CondEqual, v
		}
		t.If = append(t.If, kc)
	}
	t.Reads = req.Reads
	for i, w := range req.Then {
		n := 0
		for _, set := range []bool{w.Put != nil, w.PutBase64 != nil, w.Delete, w.Add != nil} {
			if set {
				n++
			}
		}
		if n != 1 {
			return kv.Txn{}, fmt.Errorf(`then[%d]: give exactly one of "put", "put_base64", "delete" and "add" (got %d)`, i, n)
		}
		kw := kv.Write{Key: w.Key}
		switch {
		case w.Delete:
			kw.Kind = kv.WriteDelete
		case w.Add != nil:
			kw.Kind, kw.Delta = kv.WriteAdd, *w.Add
		default:
			v, err := fieldBytes("put", w.Put, w.PutBase64)
			if err != nil {
				return kv.Txn{}, fmt.Errorf("then[%d]: %v", i, err)
			}
			kw.Kind, kw.Value = kv.WritePut, v
		}
		t.Then = append(t.Then, kw)
	}
	return t, nil
}

// serveTxn answers POST /v1/txn.
func (h *Handler) serveTxn(w http.ResponseWriter, r *http.Request) *httpError {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", "POST")
		return httpRefusal(http.StatusMethodNotAllowed, "wrong_method", "%s: a transaction is POST %s", r.Method, TxnPath)
	}
	if mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type")); err != nil || mt != "application/json" {
		return httpRefusal(http.StatusUnsupportedMediaType, "not_json", "a transaction takes Content-Type application/json, got %q", r.Header.Get("Content-Type"))
	}
	select {
	case h.sem <- struct{}{}:
		defer func() { <-h.sem }()
	default:
		return httpRefusal(http.StatusServiceUnavailable, "busy", "%d requests in progress, the most this API serves at once; retry later", cap(h.sem))
	}
	body, err := readBody(w, r, MaxTxnBody)
	if err != nil {
		return bodyError(err, "a transaction's body", MaxTxnBody)
	}
	var req TxnRequest
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return httpRefusal(http.StatusBadRequest, "bad_body", `a transaction takes {"if": [...], "reads": [...], "then": [...]} (docs/kv-http.md): %v`, err)
	}
	if dec.More() {
		return httpRefusal(http.StatusBadRequest, "bad_body", "trailing data after the JSON object")
	}
	t, err := req.toTxn()
	if err != nil {
		return httpRefusal(http.StatusBadRequest, "bad_body", "%v", err)
	}
	if err := t.Check(); err != nil {
		return errorReply(err)
	}
	if n := len(t.Encode(nil)); n > wire.MaxPayload {
		return errorReply(fmt.Errorf("%w: %d bytes encoded, the limit is %d", kv.ErrTxnTooLarge, n, wire.MaxPayload))
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.timeout)
	defer cancel()
	res, err := h.txn(ctx, t)
	if err != nil && !(errors.Is(err, kv.ErrTxnTooLarge) && res.GTS != (wire.Timestamp{})) {
		if errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil {
			return httpRefusal(http.StatusGatewayTimeout, "timeout", "no answer from the cluster within %v (the transaction may still take effect)", h.timeout)
		}
		return errorReply(err)
	}
	out := TxnResponse{Committed: res.Committed, GTS: res.GTS.String(), Failed: res.Failed, BadWrites: res.BadWrites}
	for i, k := range t.Reads {
		rv := Response{Key: k}
		found := i < len(res.Reads) && res.Reads[i].Present
		rv.Found = &found
		if found {
			rv.setValue(res.Reads[i].Value)
		}
		out.Reads = append(out.Reads, rv)
	}
	status := http.StatusOK
	switch {
	case err != nil: // the reads were over their limit: the outcome stands
		out.Reads, out.Error, out.Class = nil, err.Error(), "txn_too_large"
	case !res.Committed:
		status, out.Error, out.Class = http.StatusConflict, "transaction aborted: a condition failed or an add met a value that is not an integer", "aborted"
	}
	writeJSON(w, status, &out)
	return nil
}
