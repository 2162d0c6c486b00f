module yamuxpeer

go 1.19

require github.com/hashicorp/yamux v0.0.0

// The reference implementation comes from Debian's golang-github-hashicorp-yamux-dev
// (no module proxy is reachable); the build runs with GOPROXY=off.
replace github.com/hashicorp/yamux => /usr/share/gocode/src/github.com/hashicorp/yamux
