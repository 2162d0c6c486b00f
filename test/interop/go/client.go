package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"sync"
	"time"

	"github.com/hashicorp/yamux"
)

func payload(seed int64, size int) []byte {
	b := make([]byte, size)
	rand.New(rand.NewSource(seed)).Read(b)
	return b
}

// echoOne writes a payload and reads the same number of bytes back concurrently, then closes.
func echoOne(s *yamux.Session, data []byte) (*yamux.Stream, error) {
	st, err := s.OpenStream()
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		werr <- err
	}()
	h := sha256.New()
	_, rerr := io.CopyN(h, st, int64(len(data)))
	if err := <-werr; err != nil {
		return st, fmt.Errorf("stream %d write: %w", st.StreamID(), err)
	}
	if rerr != nil {
		return st, fmt.Errorf("stream %d read: %w", st.StreamID(), rerr)
	}
	if want := sha256.Sum256(data); !bytes.Equal(h.Sum(nil), want[:]) {
		return st, fmt.Errorf("stream %d: echo differs (sha256)", st.StreamID())
	}
	// Closing only after the whole echo is in works around this yamux version's early EOF on
	// locally closed streams (see waitStreamsGone).
	return st, st.Close()
}

// echo-client: opens -streams concurrent streams of -size random bytes each, verifies the echo by
// SHA-256, and checks that the peer closed (FIN) every stream and sent nothing beyond the echo.
func echoClient(p *peer) bool {
	var wg sync.WaitGroup
	var mu sync.Mutex
	var errs []string
	var streams []*yamux.Stream
	start := time.Now()
	for i := 0; i < p.opt.streams; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			st, err := echoOne(p.sess, payload(p.opt.seed+int64(i), p.opt.size))
			mu.Lock()
			defer mu.Unlock()
			if st != nil {
				streams = append(streams, st)
			}
			if err != nil {
				errs = append(errs, err.Error())
			}
		}(i)
	}
	wg.Wait()
	finned := waitStreamsGone(p.sess, 10*time.Second)
	extra := 0
	for _, st := range streams {
		n, _ := st.Read(make([]byte, 1))
		extra += n
	}
	ok := len(errs) == 0 && finned && extra == 0
	if len(errs) > 5 {
		errs = errs[:5]
	}
	report("echo-result", fields{
		"streams": p.opt.streams, "failed": len(errs), "errors": errs, "allClosed": finned,
		"extraBytes": extra, "ms": time.Since(start).Milliseconds(), "ok": ok,
	})
	return ok
}

// half-close-client: writes -size bytes, closes its side (FIN) at once, then expects the peer to
// answer with the hex SHA-256 of the payload followed by its own FIN.
func halfCloseClient(p *peer) bool {
	data := payload(p.opt.seed, p.opt.size)
	st, err := p.sess.OpenStream()
	if err != nil {
		report("half-close", fields{"ok": false, "err": errString(err)})
		return false
	}
	_, werr := st.Write(data)
	cerr := st.Close()
	finned := waitStreamsGone(p.sess, 10*time.Second)
	reply, rerr := io.ReadAll(st)
	want := sha256.Sum256(data)
	ok := werr == nil && cerr == nil && rerr == nil && finned && string(reply) == hex.EncodeToString(want[:])
	report("half-close", fields{
		"id": st.StreamID(), "ok": ok, "reply": string(reply), "closedByPeer": finned,
		"writeErr": errString(werr), "readErr": errString(rerr),
	})
	return ok
}

// reset-client: opens a stream, writes -size bytes and reads until the peer resets the stream.
func expectResetClient(p *peer) bool {
	st, err := p.sess.OpenStream()
	if err != nil {
		report("stream-error", fields{"err": errString(err), "reset": false})
		return false
	}
	go st.Write(payload(p.opt.seed, p.opt.size))
	total, err := readUntilError(st)
	reportReset(st, total, err)
	return errors.Is(err, yamux.ErrConnectionReset)
}

// ping: sends -count pings and reports each round trip.
func pingClient(p *peer) bool {
	ok := 0
	for i := 0; i < p.opt.count; i++ {
		rtt, err := p.sess.Ping()
		if err == nil {
			ok++
		}
		report("ping", fields{"seq": i, "rttUs": rtt.Microseconds(), "err": errString(err)})
	}
	report("ping-result", fields{"sent": p.opt.count, "ok": ok})
	return ok == p.opt.count
}

// goaway-probe: opens stream A and writes "hi"; the peer answers GoAway then "ok" on A. Once "ok"
// is read the GoAway has been processed, so OpenStream must fail with ErrRemoteGoAway; then A must
// still carry an echo of -size bytes to its end.
func goAwayProbe(p *peer) bool {
	st, err := p.sess.OpenStream()
	if err != nil {
		report("goaway-probe", fields{"ok": false, "err": "open A: " + err.Error()})
		return false
	}
	if _, err := st.Write([]byte("hi")); err != nil {
		report("goaway-probe", fields{"ok": false, "err": "write A: " + err.Error()})
		return false
	}
	got := make([]byte, 2)
	if _, err := io.ReadFull(st, got); err != nil || string(got) != "ok" {
		report("goaway-probe", fields{"ok": false, "err": fmt.Sprintf("read A: %q %v", got, err)})
		return false
	}
	_, oerr := p.sess.OpenStream()
	report("open-after-goaway", fields{"err": errString(oerr), "remoteGoAway": errors.Is(oerr, yamux.ErrRemoteGoAway)})

	data := payload(p.opt.seed, p.opt.size)
	werr := make(chan error, 1)
	go func() {
		_, err := st.Write(data)
		werr <- err
	}()
	h := sha256.New()
	_, rerr := io.CopyN(h, st, int64(len(data)))
	want := sha256.Sum256(data)
	echoed := <-werr == nil && rerr == nil && bytes.Equal(h.Sum(nil), want[:])
	st.Close()
	finned := waitStreamsGone(p.sess, 10*time.Second)
	report("existing-stream", fields{"ok": echoed && finned, "echoed": echoed, "closedByPeer": finned, "readErr": errString(rerr)})
	return errors.Is(oerr, yamux.ErrRemoteGoAway) && echoed && finned
}
