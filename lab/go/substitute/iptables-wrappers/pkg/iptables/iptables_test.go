package iptables

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// fakeTables models what the iptables binary does with the commands this package runs
// (-N, -S, -X, -C, -I, -A after "-w 5"), with the exit statuses of iptables 1.8.
type fakeTables struct {
	mu    sync.Mutex
	rules map[string][]string // "table/chain" -> rules, each its arguments joined
	calls []string
	// forced: operation -> status returned instead of running it
	forced map[string]result
}

var builtin = map[Table][]Chain{
	TableFilter: {ChainInput, ChainForward, ChainOutput},
	TableNAT:    {ChainPrerouting, ChainInput, ChainOutput, ChainPostrouting},
	TableMangle: {ChainPrerouting, ChainInput, ChainForward, ChainOutput, ChainPostrouting},
}

func newFake() *fakeTables {
	f := &fakeTables{rules: map[string][]string{}, forced: map[string]result{}}
	for table, chains := range builtin {
		for _, chain := range chains {
			f.rules[string(table)+"/"+string(chain)] = nil
		}
	}
	return f
}

func isBuiltin(table, chain string) bool {
	return slices.Contains(builtin[Table(table)], Chain(chain))
}

func (f *fakeTables) run(_ context.Context, name string, args ...string) (result, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls = append(f.calls, name+" "+strings.Join(args, " "))
	if len(args) < 6 || args[0] != "-w" || args[1] != "5" || args[4] != "-t" {
		return result{output: []byte("Bad argument"), status: 2}, nil
	}
	op, chain, table, rule := args[2], args[3], args[5], strings.Join(args[6:], " ")
	if forced, ok := f.forced[op]; ok {
		return forced, nil
	}
	key := table + "/" + chain
	rules, exists := f.rules[key]
	missing := result{output: []byte("iptables: No chain/target/match by that name."), status: 1}
	switch op {
	case "-N":
		if exists {
			return result{output: []byte("iptables: Chain already exists."), status: 1}, nil
		}
		f.rules[key] = nil
	case "-S":
		if !exists {
			return missing, nil
		}
		return result{output: []byte("-N " + chain + "\n")}, nil
	case "-X":
		if !exists || isBuiltin(table, chain) {
			return missing, nil
		}
		delete(f.rules, key)
	case "-C":
		if !exists || !slices.Contains(rules, rule) {
			return result{output: []byte("iptables: Bad rule (does a matching rule exist in that chain?)."), status: 1}, nil
		}
	case "-I", "-A":
		if !exists {
			return missing, nil
		}
		if op == "-I" {
			f.rules[key] = append([]string{rule}, rules...)
		} else {
			f.rules[key] = append(rules, rule)
		}
	default:
		return result{output: []byte("unknown option " + op), status: 2}, nil
	}
	return result{}, nil
}

// flush drops every chain that is not built in, as a firewall reload does.
func (f *fakeTables) flush() {
	f.mu.Lock()
	defer f.mu.Unlock()
	for key := range f.rules {
		table, chain, _ := strings.Cut(key, "/")
		if !isBuiltin(table, chain) {
			delete(f.rules, key)
		}
	}
}

func (f *fakeTables) has(table Table, chain Chain) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	_, ok := f.rules[string(table)+"/"+string(chain)]
	return ok
}

func (f *fakeTables) chain(table Table, chain Chain) []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.rules[string(table)+"/"+string(chain)])
}

func (f *fakeTables) force(op string, res *result) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if res == nil {
		delete(f.forced, op)
	} else {
		f.forced[op] = *res
	}
}

func (f *fakeTables) writes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, call := range f.calls {
		if !strings.Contains(call, " -C ") && !strings.Contains(call, " -S ") {
			out = append(out, call)
		}
	}
	return out
}

const firewall Chain = "KUBE-FIREWALL"

var dropLocalnet = []string{
	"-m", "comment", "--comment", "block incoming localnet connections",
	"--dst", "127.0.0.0/8",
	"!", "--src", "127.0.0.0/8",
	"-m", "conntrack",
	"!", "--ctstate", "RELATED,ESTABLISHED,DNAT",
	"-j", "DROP",
}

// kubeletSync makes the calls of the 1.38 kubelet's syncIPTablesRules
// (pkg/kubelet/kubelet_network_linux.go) in its order; it returns what each reported.
func kubeletSync(ctx context.Context, c Interface) ([]bool, error) {
	var existed []bool
	record := func(ok bool, err error) error {
		existed = append(existed, ok)
		return err
	}
	if err := record(c.EnsureChain(ctx, TableMangle, "KUBE-IPTABLES-HINT")); err != nil {
		return existed, err
	}
	if c.IsIPv6() {
		return existed, nil
	}
	steps := []func() (bool, error){
		func() (bool, error) { return c.EnsureChain(ctx, TableFilter, firewall) },
		func() (bool, error) {
			return c.EnsureRule(ctx, Prepend, TableFilter, ChainOutput, "-j", string(firewall))
		},
		func() (bool, error) {
			return c.EnsureRule(ctx, Prepend, TableFilter, ChainInput, "-j", string(firewall))
		},
		func() (bool, error) { return c.EnsureRule(ctx, Append, TableFilter, firewall, dropLocalnet...) },
	}
	for _, step := range steps {
		if err := record(step()); err != nil {
			return existed, err
		}
	}
	return existed, nil
}

func TestKubeletSyncCreatesOnceThenFindsEverything(t *testing.T) {
	fake := newFake()
	fake.rules["filter/INPUT"] = []string{"-j ACCEPT"}
	client := newRunner(ProtocolIPv4, fake.run)
	ctx := context.Background()

	existed, err := kubeletSync(ctx, client)
	if err != nil {
		t.Fatalf("first sync: %v", err)
	}
	if want := []bool{false, false, false, false, false}; !slices.Equal(existed, want) {
		t.Fatalf("first sync reported %v, want %v", existed, want)
	}
	if got := fake.chain(TableFilter, ChainInput); !slices.Equal(got, []string{"-j KUBE-FIREWALL", "-j ACCEPT"}) {
		t.Errorf("INPUT = %q: Prepend must put the jump first", got)
	}
	if got := fake.chain(TableFilter, firewall); !slices.Equal(got, []string{strings.Join(dropLocalnet, " ")}) {
		t.Errorf("KUBE-FIREWALL = %q", got)
	}
	if !fake.has(TableMangle, "KUBE-IPTABLES-HINT") {
		t.Error("no KUBE-IPTABLES-HINT chain in mangle")
	}
	wantWrites := []string{
		"iptables -w 5 -N KUBE-IPTABLES-HINT -t mangle",
		"iptables -w 5 -N KUBE-FIREWALL -t filter",
		"iptables -w 5 -I OUTPUT -t filter -j KUBE-FIREWALL",
		"iptables -w 5 -I INPUT -t filter -j KUBE-FIREWALL",
		"iptables -w 5 -A KUBE-FIREWALL -t filter " + strings.Join(dropLocalnet, " "),
	}
	if got := fake.writes(); !slices.Equal(got, wantWrites) {
		t.Fatalf("commands that change the tables:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(wantWrites, "\n"))
	}

	existed, err = kubeletSync(ctx, client)
	if err != nil {
		t.Fatalf("second sync: %v", err)
	}
	if want := []bool{true, true, true, true, true}; !slices.Equal(existed, want) {
		t.Fatalf("second sync reported %v, want %v", existed, want)
	}
	if got := fake.writes(); len(got) != len(wantWrites)+2 {
		// the two -N of the second run (which exit 1) are the only new commands
		t.Fatalf("second sync ran %d more changing commands, want only the 2 -N probes:\n%s",
			len(got)-len(wantWrites), strings.Join(got[len(wantWrites):], "\n"))
	}
	if got := fake.chain(TableFilter, ChainInput); len(got) != 2 {
		t.Errorf("INPUT holds %d rules after a second sync, want 2: %q", len(got), got)
	}
}

func TestIPv6ClientRunsIP6tablesAndSkipsTheFirewallChain(t *testing.T) {
	fake := newFake()
	client := newRunner(ProtocolIPv6, fake.run)
	if !client.IsIPv6() || client.Protocol() != ProtocolIPv6 {
		t.Fatalf("IsIPv6() = %v, Protocol() = %q", client.IsIPv6(), client.Protocol())
	}
	if _, err := kubeletSync(context.Background(), client); err != nil {
		t.Fatal(err)
	}
	if got := fake.writes(); !slices.Equal(got, []string{"ip6tables -w 5 -N KUBE-IPTABLES-HINT -t mangle"}) {
		t.Fatalf("commands: %q", got)
	}
}

func TestFailuresNameTheCommandStatusAndOutput(t *testing.T) {
	fake := newFake()
	fake.force("-N", &result{output: []byte("iptables v1.8.9 (nf_tables): Could not fetch rule set generation id: Permission denied (you must be root)"), status: 4})
	client := newRunner(ProtocolIPv4, fake.run)
	_, err := client.EnsureChain(context.Background(), TableMangle, "KUBE-IPTABLES-HINT")
	if err == nil {
		t.Fatal("EnsureChain succeeded on exit status 4")
	}
	for _, want := range []string{`"KUBE-IPTABLES-HINT"`, "iptables -w 5 -N KUBE-IPTABLES-HINT -t mangle", "exit status 4", "Permission denied"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q lacks %q", err, want)
		}
	}
	if !isResourceError(err) {
		t.Errorf("exit status 4 is a resource problem: %v", err)
	}

	fake.force("-N", nil)
	fake.force("-C", &result{output: []byte("Bad argument `--ctstate'"), status: 2})
	_, err = client.EnsureRule(context.Background(), Append, TableFilter, ChainInput, "--ctstate")
	if err == nil || !strings.Contains(err.Error(), "exit status 2") {
		t.Fatalf("EnsureRule with a bad rule: %v", err)
	}
	if len(fake.chain(TableFilter, ChainInput)) != 0 {
		t.Error("a rule was added although checking it failed")
	}
	if _, err := client.EnsureRule(context.Background(), RulePosition("-R"), TableFilter, ChainInput); err == nil {
		t.Error("EnsureRule accepted position -R")
	}
}

// writeScript puts an executable shell script name into dir.
func writeScript(t *testing.T, dir, name, body string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
}

func TestNewBestEffortKeepsTheFamiliesWhoseBinaryWorks(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no /bin/sh to run the stand-in iptables scripts")
	}
	sh, _ := exec.LookPath("sh")
	ctx := context.Background()

	empty := t.TempDir()
	t.Setenv("PATH", empty)
	if got := NewBestEffort(ctx, UseInstalledMode); len(got) != 0 {
		t.Fatalf("no iptables on PATH: got clients %v", got)
	}

	dir := t.TempDir()
	// iptables answers the probe the way iptables 1.8 does; ip6tables cannot open nat
	// (a kernel without ip6table_nat)
	writeScript(t, dir, "iptables", `[ "$*" = "-w 5 -S POSTROUTING -t nat" ] && { echo "-P POSTROUTING ACCEPT"; exit 0; }; exit 2`)
	writeScript(t, dir, "ip6tables", `echo "ip6tables v1.8.9 (legacy): can't initialize ip6tables table 'nat': Table does not exist" >&2; exit 3`)
	t.Setenv("PATH", dir+string(os.PathListSeparator)+filepath.Dir(sh))
	got := NewBestEffort(ctx, UseInstalledMode)
	if len(got) != 1 || got[ProtocolIPv4] == nil {
		t.Fatalf("want an IPv4 client only, got %v", got)
	}
	if c := got[ProtocolIPv4]; c.IsIPv6() || c.Protocol() != ProtocolIPv4 {
		t.Errorf("IPv4 client: IsIPv6 %v, Protocol %q", c.IsIPv6(), c.Protocol())
	}

	writeScript(t, dir, "ip6tables", `exit 0`)
	if got := NewBestEffort(ctx, UseInstalledMode); len(got) != 2 || !got[ProtocolIPv6].IsIPv6() {
		t.Fatalf("want both families, got %v", got)
	}
	if got := newBestEffort(ctx, Mode("detect-host"), newFake().run); len(got) != 0 {
		t.Fatalf("an unknown mode must give no clients, got %v", got)
	}
}

func TestACommandThatHangsIsStoppedAtTheTimeout(t *testing.T) {
	sh, err := exec.LookPath("sh")
	if err != nil {
		t.Skip("no /bin/sh to run the stand-in iptables script")
	}
	dir := t.TempDir()
	writeScript(t, dir, "iptables", "exec sleep 30")
	t.Setenv("PATH", dir+string(os.PathListSeparator)+filepath.Dir(sh))
	old := CommandTimeout
	CommandTimeout = 300 * time.Millisecond
	t.Cleanup(func() { CommandTimeout = old })

	started := time.Now()
	_, err = newRunner(ProtocolIPv4, execRun).EnsureChain(context.Background(), TableFilter, firewall)
	if err == nil || !strings.Contains(err.Error(), "deadline exceeded") {
		t.Fatalf("want a deadline error, got %v", err)
	}
	if elapsed := time.Since(started); elapsed > 10*time.Second {
		t.Fatalf("EnsureChain returned after %s; the timeout is %s", elapsed, CommandTimeout)
	}
	if !isResourceError(err) {
		t.Error("a command that did not finish must count as a resource problem, not as a flush")
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestMonitorReloadsAfterAFlushAndDeletesItsCanariesWhenDone(t *testing.T) {
	fake := newFake()
	client := newRunner(ProtocolIPv4, fake.run)
	const canary Chain = "KUBE-KUBELET-CANARY"
	tables := []Table{TableMangle, TableNAT, TableFilter}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var reloads atomic.Int32
	done := make(chan struct{})
	go func() {
		client.Monitor(ctx, canary, tables, func() { reloads.Add(1) }, 10*time.Millisecond)
		close(done)
	}()

	allCanaries := func() bool {
		for _, table := range tables {
			if !fake.has(table, canary) {
				return false
			}
		}
		return true
	}
	waitFor(t, "the canaries", allCanaries)

	// iptables cannot take its lock: not a flush
	fake.force("-S", &result{output: []byte("Another app is currently holding the xtables lock."), status: 4})
	time.Sleep(100 * time.Millisecond)
	if n := reloads.Load(); n != 0 {
		t.Fatalf("reloaded %d times while iptables only reported its lock held", n)
	}
	fake.force("-S", nil)

	fake.flush()
	waitFor(t, "the reload after the flush", func() bool { return reloads.Load() == 1 })
	waitFor(t, "the canaries again", allCanaries)
	time.Sleep(50 * time.Millisecond)
	if n := reloads.Load(); n != 1 {
		t.Fatalf("one flush, %d reloads", n)
	}

	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Monitor did not return after its context was cancelled")
	}
	for _, table := range tables {
		if fake.has(table, canary) {
			t.Errorf("canary left in %s after Monitor returned", table)
		}
	}
}

// TestTheKubeletRulesOnRealIptables runs the kubelet's sequence through the host's real
// iptables inside a network namespace of its own, so the host's rules are not touched.
func TestTheKubeletRulesOnRealIptables(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create a network namespace and run iptables in it")
	}
	ip, errIP := exec.LookPath("ip")
	real, errIpt := exec.LookPath("iptables")
	sh, errSh := exec.LookPath("sh")
	if errIP != nil || errIpt != nil || errSh != nil {
		t.Skipf("needs ip, iptables and sh on PATH (ip: %v, iptables: %v, sh: %v)", errIP, errIpt, errSh)
	}
	ns := fmt.Sprintf("gpufleet-iptables-test-%d", os.Getpid())
	if out, err := exec.Command(ip, "netns", "add", ns).CombinedOutput(); err != nil {
		t.Skipf("cannot create a network namespace (ip netns add): %v: %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command(ip, "netns", "delete", ns).Run() })
	dir := t.TempDir()
	writeScript(t, dir, "iptables", fmt.Sprintf(`exec %s netns exec %s %s "$@"`, ip, ns, real))
	t.Setenv("PATH", dir+string(os.PathListSeparator)+filepath.Dir(sh))

	ctx := context.Background()
	clients := NewBestEffort(ctx, UseInstalledMode)
	client := clients[ProtocolIPv4]
	if client == nil {
		t.Fatalf("no IPv4 client with %s in namespace %s: %v", real, ns, clients)
	}
	if _, ok := clients[ProtocolIPv6]; ok {
		t.Error("an IPv6 client although PATH holds no ip6tables")
	}
	for run, want := range [][]bool{{false, false, false, false, false}, {true, true, true, true, true}} {
		existed, err := kubeletSync(ctx, client)
		if err != nil {
			t.Fatalf("sync %d: %v", run+1, err)
		}
		if !slices.Equal(existed, want) {
			t.Fatalf("sync %d reported %v, want %v", run+1, existed, want)
		}
	}
	out, err := exec.Command(ip, "netns", "exec", ns, real, "-w", "5", "-S", "-t", "filter").CombinedOutput()
	if err != nil {
		t.Fatalf("iptables -S: %v: %s", err, out)
	}
	rules := string(out)
	for _, want := range []string{
		"-N KUBE-FIREWALL",
		"-A INPUT -j KUBE-FIREWALL",
		"-A OUTPUT -j KUBE-FIREWALL",
		`-A KUBE-FIREWALL ! -s 127.0.0.0/8 -d 127.0.0.0/8 -m comment --comment "block incoming localnet connections" -m conntrack ! --ctstate RELATED,ESTABLISHED,DNAT -j DROP`,
	} {
		if strings.Count(rules, want+"\n") != 1 {
			t.Errorf("filter table lacks %q exactly once:\n%s", want, rules)
		}
	}
}
