package main

import (
	"bytes"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// mainEnv makes the test binary run main() with the arguments after "--" (the real command:
// process exit code, stdout).
const mainEnv = "KVROUTE_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(mainEnv) == "1" {
		for i, a := range os.Args {
			if a == "--" {
				os.Args = append([]string{"kvroute"}, os.Args[i+1:]...)
				break
			}
		}
		main()
		return
	}
	os.Exit(m.Run())
}

// runKvroute runs the command in a child process and returns its stdout and exit code.
func runKvroute(t *testing.T, args ...string) (string, int) {
	t.Helper()
	cmd := exec.Command(os.Args[0], append([]string{"-test.run=^$", "--"}, args...)...)
	cmd.Env = append(os.Environ(), mainEnv+"=1")
	cmd.Stdin = strings.NewReader("")
	var out bytes.Buffer
	cmd.Stdout = &out
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), code
}

// TestHelp: `kvroute --help` lists every subcommand, and `kvroute SUB --help` (and -h, and
// `kvroute help SUB`) prints the subcommand's usage and flags; all exit 0 (issue 15). Unknown
// flags still fail with the JSON error and exit 2.
func TestHelp(t *testing.T) {
	// the real process for the spellings an operator types first, runMain for the others
	run := func(args []string) (string, int) {
		if args[0] == "--help" || (len(args) > 1 && args[1] == "--help") {
			return runKvroute(t, args...)
		}
		var b bytes.Buffer
		code := runMain(args, &b)
		return b.String(), code
	}
	for _, args := range [][]string{{"--help"}, {"-h"}, {"help"}} {
		out, code := run(args)
		if code != 0 || !strings.HasPrefix(out, "usage: kvroute <subcommand>") {
			t.Fatalf("%v: exit %d, output %q", args, code, out)
		}
		for name, sc := range subcommands {
			if !strings.Contains(out, "  kvroute "+sc.usage+"\n") {
				t.Errorf("%v: subcommand %s missing from %q", args, name, out)
			}
		}
	}
	// the flags each subcommand must describe
	flags := map[string][]string{
		"tokens":   {"-model", "-text"},
		"layout":   {"-model", "-contract", "-image", "-total-frames", "-source-fps", "-width", "-height"},
		"identity": {"-indices", "-contract", "-allow-loopback"},
		"blocks":   nil,
		"events":   {"-model", "-encoding", "-block-size"},
		"explain":  {"-admin", "-path", "-timeout"},
	}
	if len(flags) != len(subcommands) {
		t.Fatalf("test covers %d subcommands, the command has %d", len(flags), len(subcommands))
	}
	for name, want := range flags {
		for _, args := range [][]string{{name, "--help"}, {name, "-h"}, {"help", name}} {
			out, code := run(args)
			if code != 0 || !strings.HasPrefix(out, "usage: kvroute "+subcommands[name].usage+"\n") {
				t.Fatalf("%v: exit %d, output %q", args, code, out)
			}
			for _, f := range want {
				if !strings.Contains(out, "  "+f+" ") && !strings.Contains(out, "  "+f+"\n") {
					t.Errorf("%v: flag %s not described in %q", args, f, out)
				}
			}
		}
	}
	out, code := runKvroute(t, "tokens", "--nosuch")
	if code != 2 || !strings.Contains(out, `{"error":"parsing tokens flags: flag provided but not defined: -nosuch"}`) {
		t.Fatalf("unknown flag: exit %d, output %q", code, out)
	}
}
