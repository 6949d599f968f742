// Command kyverno-oracle answers JSON-lines mutation cases as Kyverno's own engine does
// (README.md). `kyverno-oracle` reads cases on stdin and writes one answer per line on
// stdout, in order; `kyverno-oracle clitest DIR...` replays the mutate results of
// Kyverno's own CLI tests (kyverno-test.yaml files under DIR) through the same code.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"time"

	"k8s.io/klog/v2"
)

func main() {
	// Kyverno and client-go log through klog: keep stdout for answers and stderr quiet.
	klogFlags := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(klogFlags)
	_ = klogFlags.Set("logtostderr", "false")
	_ = klogFlags.Set("stderrthreshold", "FATAL")
	klog.SetOutput(io.Discard)

	if path := os.Getenv("ORACLE_CPUPROFILE"); path != "" {
		f, err := os.Create(path)
		if err == nil && pprof.StartCPUProfile(f) == nil {
			defer pprof.StopCPUProfile()
		}
	}
	// Compiling policies allocates much and keeps little: collect garbage less often.
	debug.SetGCPercent(400)
	oracle, err := NewOracle()
	if err != nil {
		fmt.Fprintln(os.Stderr, "kyverno-oracle:", err)
		os.Exit(2)
	}
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "clitest":
			os.Exit(runCLITests(oracle, os.Args[2:], os.Stdout))
		case "totest":
			os.Exit(runToTest(oracle, os.Args[2:], os.Stdin, os.Stdout))
		case "yaml":
			os.Exit(runYAML(os.Stdin, os.Stdout))
		default:
			fmt.Fprintln(os.Stderr, "usage: kyverno-oracle < cases.jsonl > answers.jsonl\n       kyverno-oracle clitest [-v] DIR...\n       kyverno-oracle totest DIR < cases.jsonl\n       kyverno-oracle yaml < texts.jsonl")
			os.Exit(2)
		}
	}
	if err := serve(oracle, os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "kyverno-oracle:", err)
		pprof.StopCPUProfile()
		os.Exit(1)
	}
}

// serve answers each input line; blank lines are ignored. Output is flushed whenever no
// more input is waiting, so a caller may also feed one case at a time.
func serve(oracle *Oracle, in io.Reader, out io.Writer) error {
	limit := caseLimit()
	reader := bufio.NewReaderSize(in, 1<<20)
	writer := bufio.NewWriterSize(out, 1<<20)
	defer writer.Flush()
	for {
		line, err := reader.ReadBytes('\n')
		if len(trimSpace(line)) > 0 {
			answer := answerWithin(oracle, line, limit)
			encoded, merr := json.Marshal(answer)
			if merr != nil {
				encoded, _ = json.Marshal(Answer{ID: answer.ID, Status: statusPanic, Message: "answer not encodable: " + merr.Error()})
			}
			writer.Write(encoded)
			writer.WriteByte('\n')
			if reader.Buffered() == 0 {
				if ferr := writer.Flush(); ferr != nil {
					return ferr
				}
			}
		}
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
	}
}

// caseLimit is how long one case may take: DIFFERENTIAL_CASE_SECONDS, 20 s
// unless set (a first MutatingPolicy compiles in about a second here).
func caseLimit() time.Duration {
	seconds, err := strconv.ParseFloat(os.Getenv("DIFFERENTIAL_CASE_SECONDS"), 64)
	if err != nil || seconds <= 0 {
		seconds = 20
	}
	return time.Duration(seconds * float64(time.Second))
}

// answerWithin is the case's answer, or a "timeout" answer when the engine
// takes longer than limit. The case is abandoned, not stopped: its goroutine
// may go on, and the caller fails the run on the timeout anyway.
func answerWithin(oracle *Oracle, line []byte, limit time.Duration) Answer {
	done := make(chan Answer, 1)
	go func() { done <- oracle.Answer(line) }()
	timer := time.NewTimer(limit)
	defer timer.Stop()
	select {
	case answer := <-done:
		return answer
	case <-timer.C:
		var id struct {
			ID json.RawMessage `json:"id"`
		}
		_ = json.Unmarshal(line, &id)
		return Answer{ID: id.ID, Status: statusTimeout, Message: fmt.Sprintf("no answer within %s", limit)}
	}
}

func trimSpace(b []byte) []byte {
	for len(b) > 0 && (b[0] == ' ' || b[0] == '\t' || b[0] == '\r' || b[0] == '\n') {
		b = b[1:]
	}
	for len(b) > 0 && (b[len(b)-1] == ' ' || b[len(b)-1] == '\t' || b[len(b)-1] == '\r' || b[len(b)-1] == '\n') {
		b = b[:len(b)-1]
	}
	return b
}
