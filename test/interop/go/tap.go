package main

import (
	"encoding/binary"
	"net"
	"sync"
)

// tapConn wraps the TCP connection under the yamux session so that the peer can inject a raw
// frame (this yamux version has no Stream.Reset) without splitting a frame the session is writing:
// it follows the outgoing frame boundaries and only injects between two frames.
type tapConn struct {
	net.Conn
	mu        sync.Mutex
	boundary  *sync.Cond
	hdr       []byte // bytes of a header written so far
	remaining uint32 // body bytes of the current data frame still to come
}

func newTapConn(c net.Conn) *tapConn {
	t := &tapConn{Conn: c, hdr: make([]byte, 0, 12)}
	t.boundary = sync.NewCond(&t.mu)
	return t
}

func (t *tapConn) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	n, err := t.Conn.Write(p)
	t.track(p[:n])
	t.boundary.Broadcast()
	return n, err
}

func (t *tapConn) track(p []byte) {
	for len(p) > 0 {
		if t.remaining > 0 {
			k := uint32(len(p))
			if k > t.remaining {
				k = t.remaining
			}
			t.remaining -= k
			p = p[k:]
			continue
		}
		k := 12 - len(t.hdr)
		if k > len(p) {
			k = len(p)
		}
		t.hdr = append(t.hdr, p[:k]...)
		p = p[k:]
		if len(t.hdr) == 12 {
			if t.hdr[1] == typeData {
				t.remaining = binary.BigEndian.Uint32(t.hdr[8:12])
			}
			t.hdr = t.hdr[:0]
		}
	}
}

// Inject writes a whole frame between two of the session's frames.
func (t *tapConn) Inject(frame []byte) error {
	t.mu.Lock()
	defer t.mu.Unlock()
	for t.remaining > 0 || len(t.hdr) > 0 {
		t.boundary.Wait()
	}
	_, err := t.Conn.Write(frame)
	return err
}

const (
	typeData         = 0
	typeWindowUpdate = 1
	flagRST          = 8
)

// rstFrame is the frame hashicorp/yamux itself uses to refuse a stream: WindowUpdate, RST, length 0.
func rstFrame(id uint32) []byte {
	f := make([]byte, 12)
	f[1] = typeWindowUpdate
	binary.BigEndian.PutUint16(f[2:4], flagRST)
	binary.BigEndian.PutUint32(f[4:8], id)
	return f
}
