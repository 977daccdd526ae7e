package gateway

import (
	"bytes"
	"errors"
	"net/http"
	"os"
	"time"
)

// bodyFault is why a client's body could not be read.
type bodyFault int

const (
	bodyRead bodyFault = iota
	// bodyTooLarge: over the limit, declared or read.
	bodyTooLarge
	// bodySlow: not complete within the body read timeout.
	bodySlow
	// bodyClientGone: the client closed the connection.
	bodyClientGone
	// bodyBroken: any other read error.
	bodyBroken
)

// initialBodyBuffer is the most a body buffer starts with, whatever the
// client declares.
const initialBodyBuffer = 64 << 10

// readClientBody reads r's body, at most limit bytes, within timeout; every
// inbound API reads its body here.
//
// Memory follows what arrives, not what the client declares: the buffer
// starts at no more than initialBodyBuffer and doubles as bytes come in
// (linear work overall), so a client that declares 8 MiB and sends a byte a
// second holds 64 KiB of the gateway, not 8 MiB.
//
// A body not complete by the deadline is bodySlow: the caller answers 408,
// and the connection is marked to close after that answer with the read
// deadline left in the past, so the server does not go on reading the
// trickle to reuse the connection.
func readClientBody(w http.ResponseWriter, r *http.Request, limit int64, timeout time.Duration) ([]byte, bodyFault, error) {
	if r.ContentLength > limit {
		return nil, bodyTooLarge, nil
	}
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(timeout))
	size := int64(initialBodyBuffer)
	if r.ContentLength >= 0 && r.ContentLength < size {
		size = r.ContentLength + 1 // +1 so ReadFrom sees EOF without growing
	}
	buf := bytes.NewBuffer(make([]byte, 0, size))
	_, err := buf.ReadFrom(http.MaxBytesReader(w, r.Body, limit))
	if err == nil {
		_ = rc.SetReadDeadline(time.Time{})
		return buf.Bytes(), bodyRead, nil
	}
	var tooBig *http.MaxBytesError
	switch {
	case errors.As(err, &tooBig):
		_ = rc.SetReadDeadline(time.Time{})
		return nil, bodyTooLarge, err
	case errors.Is(err, os.ErrDeadlineExceeded):
		// The read error also cancels r's context; it is not the client
		// leaving, and the client must hear why.
		w.Header().Set("Connection", "close")
		return nil, bodySlow, err
	case r.Context().Err() != nil:
		return nil, bodyClientGone, err
	default:
		_ = rc.SetReadDeadline(time.Time{})
		return nil, bodyBroken, err
	}
}
