// Package weft is an atomic-multicast toolkit: it orders messages sent to
// any subset of replica groups so that every group delivers them in one
// consistent global order. The protocol cores (package wire for messages and
// their encoding, package amcast and its subpackages for the protocols
// themselves) are pure, deterministic state machines: they never read the
// clock, start goroutines, touch the network or files, or use global
// randomness, which lets the simulator (package sim) replay any run exactly
// and lets internal/check verify the histories it produces. This root
// package holds no code; its tests enforce that purity.
package weft
