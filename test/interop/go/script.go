package main

import (
	"io"
	"time"
)

// script-client: the fixed sequence whose bytes the wire test records: open a stream, write
// "hello", close it, ping (the recorder answers), send GoAway.
func scriptClient(p *peer) bool {
	st, err := p.sess.OpenStream()
	if err == nil {
		_, err = st.Write([]byte("hello"))
	}
	if err == nil {
		err = st.Close()
	}
	if err == nil {
		_, err = p.sess.Ping()
	}
	if err == nil {
		err = p.sess.GoAway()
	}
	report("script-done", fields{"err": errString(err)})
	return err == nil
}

// script-server: accept one stream, read it to EOF, echo what was read and close; open a stream of
// its own, write "world", close it; then send GoAway. Pings are answered by the library.
func scriptServer(p *peer) bool {
	st, err := p.sess.AcceptStream()
	var got []byte
	if err == nil {
		got, err = io.ReadAll(st)
	}
	if err == nil {
		_, err = st.Write(got)
	}
	if err == nil {
		err = st.Close()
	}
	if err == nil {
		st2, oerr := p.sess.OpenStream()
		err = oerr
		if err == nil {
			_, err = st2.Write([]byte("world"))
		}
		if err == nil {
			err = st2.Close()
		}
	}
	if err == nil {
		err = p.sess.GoAway()
	}
	report("script-done", fields{"err": errString(err), "read": string(got)})
	if err == nil {
		// Stay up until the recorder hangs up, so the session's last frames are not cut short.
		select {
		case <-p.sess.CloseChan():
		case <-time.After(10 * time.Second):
		}
	}
	return err == nil
}
