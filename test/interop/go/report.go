package main

import (
	"encoding/json"
	"os"
	"sync"
)

// fields is one JSON result line; "event" names it.
type fields map[string]interface{}

var reportMu sync.Mutex

// report prints one machine-readable JSON line on stdout for the TypeScript test to assert.
func report(event string, f fields) {
	if f == nil {
		f = fields{}
	}
	f["event"] = event
	line, err := json.Marshal(f)
	if err != nil {
		panic(err)
	}
	reportMu.Lock()
	defer reportMu.Unlock()
	os.Stdout.Write(append(line, '\n'))
}

// errString renders an error for a JSON field ("" for nil).
func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
