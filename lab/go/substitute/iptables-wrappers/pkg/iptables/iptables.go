// Package iptables is gpufleet's stand-in for sigs.k8s.io/iptables-wrappers/pkg/iptables,
// the package Kubernetes 1.38 moved pkg/util/iptables to. The Go module proxy serves that
// module at no version, so the pinned 1.38 kubelet is built against this one (a replace
// directive in the generated build module).
//
// It holds exactly what the 1.38 kubelet calls (pkg/kubelet/kubelet_network_linux.go):
// NewBestEffort with UseInstalledMode and, on the clients it returns, EnsureChain,
// EnsureRule, IsIPv6, Protocol and Monitor, with the Table, Chain, RulePosition and
// Protocol types and their constants. Each operation runs the iptables or ip6tables
// binary found on PATH ("-w 5", as the in-tree package of 1.37 did), bounded by
// CommandTimeout.
//
// What it leaves out:
//   - mode detection: there is no DetectHostMode; UseInstalledMode runs whatever
//     iptables the host's alternatives name (legacy or nft), never choosing between
//     iptables-legacy and iptables-nft by the rules already present;
//   - nftables: nothing is done through nft directly;
//   - everything else of the upstream API (save/restore, flush, delete, rule parsing,
//     New): kube-proxy, which needs it, does not build against this module.
//
// Best effort, as the kubelet treats it: a family whose binary is missing or cannot list
// the nat table's POSTROUTING chain gets no client and the reason is logged; with none,
// the kubelet logs that there is no iptables support and creates no chains.
package iptables

import (
	"context"
	"errors"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"k8s.io/klog/v2"
)

// Protocol is the IP family a client manages; its values are those of v1.IPFamily.
type Protocol string

const (
	// ProtocolIPv4 is managed with the iptables binary.
	ProtocolIPv4 Protocol = "IPv4"
	// ProtocolIPv6 is managed with the ip6tables binary.
	ProtocolIPv6 Protocol = "IPv6"
)

// Table is an iptables table.
type Table string

const (
	// TableNAT is the built-in nat table.
	TableNAT Table = "nat"
	// TableFilter is the built-in filter table.
	TableFilter Table = "filter"
	// TableMangle is the built-in mangle table.
	TableMangle Table = "mangle"
)

// Chain is an iptables chain.
type Chain string

const (
	// ChainPostrouting is the built-in POSTROUTING chain.
	ChainPostrouting Chain = "POSTROUTING"
	// ChainPrerouting is the built-in PREROUTING chain.
	ChainPrerouting Chain = "PREROUTING"
	// ChainOutput is the built-in OUTPUT chain.
	ChainOutput Chain = "OUTPUT"
	// ChainInput is the built-in INPUT chain.
	ChainInput Chain = "INPUT"
	// ChainForward is the built-in FORWARD chain.
	ChainForward Chain = "FORWARD"
)

// RulePosition is where EnsureRule puts a missing rule: its iptables flag.
type RulePosition string

const (
	// Prepend inserts the rule at the head of the chain (-I).
	Prepend RulePosition = "-I"
	// Append appends the rule to the chain (-A).
	Append RulePosition = "-A"
)

// Mode says which iptables binaries a client runs.
type Mode string

const (
	// UseInstalledMode runs the iptables and ip6tables found on PATH, whichever backend
	// (legacy or nft) they are. It is the only mode this stand-in has.
	UseInstalledMode Mode = "installed"
)

// CommandTimeout bounds every iptables command (which itself waits at most 5 s for the
// xtables lock).
var CommandTimeout = 30 * time.Second

const (
	// exit status of iptables when the operation failed (chain exists, rule absent)
	statusFailed = 1
	// exit status of iptables for a resource problem (the xtables lock was not taken)
	statusResourceProblem = 4
	// how long Monitor waits for the canaries of the other tables to vanish once the
	// first table's has
	flushTimeout  = 5 * time.Second
	flushPollTime = 100 * time.Millisecond
)

// Interface is an iptables client for one IP family. Implementations are safe for
// concurrent use.
type Interface interface {
	// EnsureChain creates chain in table unless it exists; true when it existed.
	EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error)
	// EnsureRule adds the rule args to chain in table at position unless an identical
	// rule is there (iptables -C); true when it was there.
	EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error)
	// IsIPv6 is true for the IPv6 client.
	IsIPv6() bool
	// Protocol is the IP family this client manages.
	Protocol() Protocol
	// Monitor creates the canary chain in each table and polls tables[0] every interval;
	// when the canary is gone (an outside tool flushed the tables) it waits up to 5 s
	// for the other tables' canaries to go too, calls reloadFunc and starts over. It
	// returns when ctx is done, deleting the canaries. Run it in a goroutine.
	Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration)
}

// result is one finished command: its combined output and exit status.
type result struct {
	output []byte
	status int
}

// runFunc runs a command and returns its result; an error means it could not run or
// did not finish (not found, timed out), not a non-zero exit status.
type runFunc func(ctx context.Context, name string, args ...string) (result, error)

func execRun(ctx context.Context, name string, args ...string) (result, error) {
	ctx, cancel := context.WithTimeout(ctx, CommandTimeout)
	defer cancel()
	out, err := exec.CommandContext(ctx, name, args...).CombinedOutput()
	var exitErr *exec.ExitError
	switch {
	case ctx.Err() != nil:
		return result{output: out}, fmt.Errorf("%s %s: %w", name, strings.Join(args, " "), ctx.Err())
	case errors.As(err, &exitErr):
		return result{output: out, status: exitErr.ExitCode()}, nil
	case err != nil:
		return result{output: out}, err
	}
	return result{output: out}, nil
}

type runner struct {
	protocol Protocol
	command  string
	run      runFunc
}

func newRunner(protocol Protocol, run runFunc) *runner {
	command := "iptables"
	if protocol == ProtocolIPv6 {
		command = "ip6tables"
	}
	return &runner{protocol: protocol, command: command, run: run}
}

// NewBestEffort returns a client for each IP family whose iptables binary works here
// (it lists the nat table's POSTROUTING chain), keyed by family: IPv4, IPv6, both or
// none. A family left out is logged with the reason; an empty map means no iptables
// support, which callers treat as such, not as an error.
func NewBestEffort(ctx context.Context, mode Mode) map[Protocol]Interface {
	return newBestEffort(ctx, mode, execRun)
}

func newBestEffort(ctx context.Context, mode Mode, run runFunc) map[Protocol]Interface {
	logger := klog.FromContext(ctx)
	clients := map[Protocol]Interface{}
	if mode != UseInstalledMode {
		logger.Error(nil, "iptables: unsupported mode; this build knows only UseInstalledMode", "mode", mode)
		return clients
	}
	for _, protocol := range []Protocol{ProtocolIPv4, ProtocolIPv6} {
		r := newRunner(protocol, run)
		if _, err := r.chainExists(ctx, TableNAT, ChainPostrouting); err != nil {
			logger.Info("iptables: no client for this IP family", "protocol", protocol, "command", r.command, "reason", err.Error())
			continue
		}
		clients[protocol] = r
	}
	return clients
}

func (r *runner) IsIPv6() bool       { return r.protocol == ProtocolIPv6 }
func (r *runner) Protocol() Protocol { return r.protocol }

// commandError is a command that ran and exited non-zero.
type commandError struct {
	command string
	args    []string
	result  result
}

func (e *commandError) Error() string {
	return fmt.Sprintf("%s %s: exit status %d: %s", e.command, strings.Join(e.args, " "),
		e.result.status, strings.TrimSpace(string(e.result.output)))
}

// do runs "iptables -w 5 OP CHAIN -t TABLE ARGS..." and returns its exit status; a
// command that did not run or finish is an error, as is any status but 0 and those
// in accepted.
func (r *runner) do(ctx context.Context, op string, table Table, chain Chain, args []string, accepted ...int) (int, error) {
	full := append([]string{"-w", "5", op, string(chain), "-t", string(table)}, args...)
	klog.FromContext(ctx).V(5).Info("Running", "command", r.command, "arguments", full)
	res, err := r.run(ctx, r.command, full...)
	if err != nil {
		return -1, err
	}
	if res.status == 0 {
		return 0, nil
	}
	for _, status := range accepted {
		if res.status == status {
			return status, nil
		}
	}
	return res.status, &commandError{command: r.command, args: full, result: res}
}

// EnsureChain is part of Interface. iptables -N exits 1 when the chain exists.
func (r *runner) EnsureChain(ctx context.Context, table Table, chain Chain) (bool, error) {
	status, err := r.do(ctx, "-N", table, chain, nil, statusFailed)
	if err != nil {
		return false, fmt.Errorf("creating chain %q in table %q: %w", chain, table, err)
	}
	return status == statusFailed, nil
}

// EnsureRule is part of Interface. iptables -C exits 1 when no such rule is there.
func (r *runner) EnsureRule(ctx context.Context, position RulePosition, table Table, chain Chain, args ...string) (bool, error) {
	if position != Prepend && position != Append {
		return false, fmt.Errorf("rule position %q: want Prepend (-I) or Append (-A)", position)
	}
	status, err := r.do(ctx, "-C", table, chain, args, statusFailed)
	if err != nil {
		return false, fmt.Errorf("checking rule in chain %q of table %q: %w", chain, table, err)
	}
	if status == 0 {
		return true, nil
	}
	if _, err := r.do(ctx, string(position), table, chain, args); err != nil {
		return false, fmt.Errorf("adding rule to chain %q of table %q: %w", chain, table, err)
	}
	return false, nil
}

// chainExists is true when iptables -S lists chain in table; false with the error
// otherwise (absent, or iptables failed: see isResourceError).
func (r *runner) chainExists(ctx context.Context, table Table, chain Chain) (bool, error) {
	if _, err := r.do(ctx, "-S", table, chain, nil); err != nil {
		return false, fmt.Errorf("listing chain %q in table %q: %w", chain, table, err)
	}
	return true, nil
}

func (r *runner) deleteChain(ctx context.Context, table Table, chain Chain) error {
	if _, err := r.do(ctx, "-X", table, chain, nil); err != nil {
		return fmt.Errorf("deleting chain %q in table %q: %w", chain, table, err)
	}
	return nil
}

// isResourceError is true when iptables could not attempt the request (exit status 4:
// it timed out waiting for the xtables lock) or did not finish.
func isResourceError(err error) bool {
	var cmdErr *commandError
	if errors.As(err, &cmdErr) {
		return cmdErr.result.status == statusResourceProblem
	}
	return err != nil
}

// Monitor is part of Interface.
func (r *runner) Monitor(ctx context.Context, canary Chain, tables []Table, reloadFunc func(), interval time.Duration) {
	logger := klog.FromContext(ctx)
	if len(tables) == 0 {
		logger.Error(nil, "iptables: Monitor needs at least one table", "chain", canary)
		return
	}
	for {
		created := poll(ctx, interval, true, func() bool {
			for _, table := range tables {
				if _, err := r.EnsureChain(ctx, table, canary); err != nil {
					logger.Error(err, "Could not set up iptables canary", "table", table, "chain", canary)
					return false
				}
			}
			return true
		})
		if !created {
			r.deleteCanaries(ctx, canary, tables)
			return
		}
		flushed := poll(ctx, interval, false, func() bool {
			exists, err := r.chainExists(ctx, tables[0], canary)
			if exists {
				return false
			}
			if isResourceError(err) {
				logger.Error(err, "Could not check for iptables canary", "table", tables[0], "chain", canary)
				return false
			}
			logger.V(2).Info("IPTables canary deleted", "table", tables[0], "chain", canary)
			rest := func() bool {
				for _, table := range tables[1:] {
					if exists, err := r.chainExists(ctx, table, canary); exists || isResourceError(err) {
						return false
					}
				}
				return true
			}
			waitCtx, cancel := context.WithTimeout(ctx, flushTimeout)
			defer cancel()
			if !poll(waitCtx, flushPollTime, true, rest) && ctx.Err() == nil {
				logger.Info("Inconsistent iptables state detected")
			}
			return true
		})
		if !flushed || ctx.Err() != nil {
			r.deleteCanaries(ctx, canary, tables)
			return
		}
		logger.V(2).Info("Reloading after iptables flush")
		reloadFunc()
	}
}

// deleteCanaries removes the canary chains once ctx is done, with a context of its own.
func (r *runner) deleteCanaries(ctx context.Context, canary Chain, tables []Table) {
	cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), CommandTimeout)
	defer cancel()
	for _, table := range tables {
		_ = r.deleteChain(cleanup, table, canary)
	}
}

// poll calls done every interval (first at once when immediate) until it returns true
// (poll returns true) or ctx is done (false).
func poll(ctx context.Context, interval time.Duration, immediate bool, done func() bool) bool {
	if immediate && ctx.Err() == nil && done() {
		return true
	}
	ticker := time.NewTicker(interval)
	defer ticker.Stop()
	for {
		select {
		case <-ctx.Done():
			return false
		case <-ticker.C:
			if ctx.Err() != nil {
				return false
			}
			if done() {
				return true
			}
		}
	}
}
