// Command yamuxpeer drives the reference yamux (hashicorp/yamux) against the project's TypeScript
// implementation. It dials -addr (a loopback TCP listener opened by the test), runs one scripted
// -mode and prints its results as JSON lines on stdout; yamux's own log goes to stderr.
package main

import (
	"flag"
	"fmt"
	"net"
	"os"
	"time"

	"github.com/hashicorp/yamux"
)

type options struct {
	streams     int
	size        int
	count       int
	goAwayAfter int
	resetAfter  int
	acceptDelay time.Duration
	replyDelay  time.Duration
	seed        int64
}

type peer struct {
	sess *yamux.Session
	tap  *tapConn
	opt  options
}

type mode struct {
	client bool // yamux role: client opens odd stream ids, server even
	run    func(p *peer) bool
}

var modes = map[string]mode{
	"echo-server":       {false, echoServer},
	"digest-server":     {false, digestServer},
	"expect-reset":      {false, expectResetServer},
	"reset-first":       {false, resetFirstServer},
	"hold":              {false, holdServer},
	"late-accept":       {false, lateAcceptServer},
	"script-server":     {false, scriptServer},
	"echo-client":       {true, echoClient},
	"half-close-client": {true, halfCloseClient},
	"reset-client":      {true, expectResetClient},
	"ping":              {true, pingClient},
	"goaway-probe":      {true, goAwayProbe},
	"script-client":     {true, scriptClient},
}

func main() {
	addr := flag.String("addr", "", "loopback host:port to dial")
	name := flag.String("mode", "", "scenario to run")
	backlog := flag.Int("backlog", 0, "yamux AcceptBacklog (0: library default)")
	var o options
	flag.IntVar(&o.streams, "streams", 1, "streams to open")
	flag.IntVar(&o.size, "size", 1024, "payload bytes per stream")
	flag.IntVar(&o.count, "count", 3, "pings to send")
	flag.IntVar(&o.goAwayAfter, "goaway-after", 0, "send GoAway after accepting this many streams (0: never)")
	flag.IntVar(&o.resetAfter, "reset-after", 1, "bytes to read before resetting the first stream")
	flag.DurationVar(&o.acceptDelay, "accept-delay", 0, "late-accept: wait this long before accepting")
	flag.DurationVar(&o.replyDelay, "reply-delay", 0, "late-accept: pause this long inside the reply")
	flag.Int64Var(&o.seed, "seed", 1, "payload seed")
	flag.Parse()

	m, found := modes[*name]
	if !found || *addr == "" {
		fmt.Fprintf(os.Stderr, "usage: yamuxpeer -addr host:port -mode <mode>; unknown mode %q\n", *name)
		os.Exit(2)
	}
	conn, err := net.DialTimeout("tcp", *addr, 5*time.Second)
	if err != nil {
		report("fatal", fields{"err": err.Error()})
		os.Exit(1)
	}
	tap := newTapConn(conn)
	cfg := yamux.DefaultConfig()
	if *backlog > 0 {
		cfg.AcceptBacklog = *backlog
	}
	var sess *yamux.Session
	if m.client {
		sess, err = yamux.Client(tap, cfg)
	} else {
		sess, err = yamux.Server(tap, cfg)
	}
	if err != nil {
		report("fatal", fields{"err": err.Error()})
		os.Exit(1)
	}
	ok := m.run(&peer{sess: sess, tap: tap, opt: o})
	report("done", fields{"ok": ok})
	sess.Close()
	if !ok {
		os.Exit(1)
	}
}

// waitStreamsGone waits until every stream of the session has been closed by both sides (or reset).
// This yamux version returns io.EOF from Read on a locally closed stream whose buffer is momentarily
// empty, so a half-closed Go stream cannot simply read until EOF: it waits for the peer's FIN first.
func waitStreamsGone(s *yamux.Session, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for s.NumStreams() > 0 {
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(2 * time.Millisecond)
	}
	return true
}
