package main

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"time"

	"github.com/hashicorp/yamux"
)

// acceptLoop hands every inbound stream to handle until the session ends, then reports why it ended.
func acceptLoop(p *peer, handle func(n int, st *yamux.Stream)) bool {
	for n := 1; ; n++ {
		st, err := p.sess.AcceptStream()
		if err != nil {
			report("session-closed", fields{"err": errString(err)})
			return true
		}
		report("accepted", fields{"id": st.StreamID()})
		if p.opt.goAwayAfter > 0 && n == p.opt.goAwayAfter {
			report("goaway-sent", fields{"err": errString(p.sess.GoAway())})
		}
		go handle(n, st)
	}
}

// echo copies a stream back to its sender and closes (FIN) once the sender has closed.
func echo(st *yamux.Stream) {
	n, err := io.Copy(st, st)
	cerr := st.Close()
	report("echoed", fields{"id": st.StreamID(), "bytes": n, "err": errString(err), "closeErr": errString(cerr)})
}

// echo-server: echoes every stream; with -goaway-after N it sends GoAway after the Nth accept.
func echoServer(p *peer) bool {
	return acceptLoop(p, func(_ int, st *yamux.Stream) { echo(st) })
}

// digest-server: reads each stream to EOF (the peer's FIN), then answers with the hex SHA-256 of
// what it read and closes: the reply only arrives if the peer's half-close left its read side open.
func digestServer(p *peer) bool {
	return acceptLoop(p, func(_ int, st *yamux.Stream) {
		h := sha256.New()
		n, err := io.Copy(h, st)
		sum := hex.EncodeToString(h.Sum(nil))
		_, werr := st.Write([]byte(sum))
		st.Close()
		report("digest", fields{"id": st.StreamID(), "bytes": n, "sha256": sum, "err": errString(err), "writeErr": errString(werr)})
	})
}

// readUntilError reads a stream until it fails, reporting once the first data has arrived.
func readUntilError(st *yamux.Stream) (int, error) {
	buf := make([]byte, 32*1024)
	total := 0
	for {
		n, err := st.Read(buf)
		if n > 0 && total == 0 {
			report("reading", fields{"id": st.StreamID()})
		}
		total += n
		if err != nil {
			return total, err
		}
	}
}

func reportReset(st *yamux.Stream, total int, err error) {
	_, werr := st.Write([]byte("after reset"))
	report("stream-error", fields{
		"id":       st.StreamID(),
		"bytes":    total,
		"err":      errString(err),
		"reset":    errors.Is(err, yamux.ErrConnectionReset),
		"writeErr": errString(werr),
	})
}

// expect-reset: reads every stream until it fails and reports whether it failed with a reset.
func expectResetServer(p *peer) bool {
	return acceptLoop(p, func(_ int, st *yamux.Stream) {
		total, err := readUntilError(st)
		reportReset(st, total, err)
	})
}

// reset-first: resets the first stream (raw RST frame) after -reset-after bytes; echoes the others.
func resetFirstServer(p *peer) bool {
	return acceptLoop(p, func(n int, st *yamux.Stream) {
		if n > 1 {
			echo(st)
			return
		}
		_, err := io.ReadFull(st, make([]byte, p.opt.resetAfter))
		ierr := p.tap.Inject(rstFrame(st.StreamID()))
		report("rst-sent", fields{"id": st.StreamID(), "readErr": errString(err), "err": errString(ierr)})
	})
}

// hold: never accepts, so inbound streams beyond -backlog are refused by the library with RST.
func holdServer(p *peer) bool {
	<-p.sess.CloseChan()
	report("session-closed", fields{})
	return true
}

// late-accept: starts accepting only after -accept-delay, so a stream the peer opened and
// half-closed at once is already FIN'd when AcceptStream runs, and this reference then never sends
// an ACK for it. It answers "<what it read>:" at once and "done" -reply-delay later, then closes.
func lateAcceptServer(p *peer) bool {
	time.Sleep(p.opt.acceptDelay)
	return acceptLoop(p, func(_ int, st *yamux.Stream) {
		got, err := io.ReadAll(st)
		_, werr := st.Write(append(got, ':'))
		time.Sleep(p.opt.replyDelay)
		if werr == nil {
			_, werr = st.Write([]byte("done"))
		}
		st.Close()
		report("late-reply", fields{"id": st.StreamID(), "read": string(got), "err": errString(err), "writeErr": errString(werr)})
	})
}
