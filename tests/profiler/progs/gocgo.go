// A Go program that allocates known sizes from C (cgo) and ends in each of
// the ways the Go runtime ends a process (runtime.exit, a raw exit_group):
// returning from main, os.Exit, a panic, os.Exit on another goroutine;
// or waits to be killed by a signal (Go's handler then raises it again).
// Expectations in tests/profiler/e2e.py (scenario go).
// Usage: gocgo return|exit|panic|goexit|threads|wait FILE
package main

/*
#cgo CFLAGS: -O0 -g -fno-omit-frame-pointer
#include <stdlib.h>

static void *volatile sink;

// One call site of malloc each, never a tail call (-O0): the dump's
// innermost frame names the function.
void *c_alloc(size_t n) { void *p = malloc(n); sink = p; return p; }
void *c_goroutine_alloc(size_t n) { void *p = malloc(n); sink = p; return p; }
void *c_thread_alloc(size_t n) { void *p = malloc(n); sink = p; return p; }
*/
import "C"

import (
	"fmt"
	"os"
	"runtime"
	"sync"
	"time"
	"unsafe"
)

var kept []unsafe.Pointer

// 10 blocks of 100..109 bytes, the even ones freed:
// MEM_TOTAL (10, 1045), MEM_MAX 109, MEM_LIVE (5, 525).
func allocate() {
	for i := 0; i < 10; i++ {
		p := C.c_alloc(C.size_t(100 + i))
		if i%2 == 0 {
			C.free(p)
		} else {
			kept = append(kept, p)
		}
	}
}

// Four goroutines on threads of their own, 1000 blocks of 64+t bytes each,
// every tenth kept.
func threads() {
	var wg sync.WaitGroup
	var mu sync.Mutex
	for t := 0; t < 4; t++ {
		wg.Add(1)
		go func(t int) {
			defer wg.Done()
			runtime.LockOSThread()
			for i := 0; i < 1000; i++ {
				p := C.c_thread_alloc(C.size_t(64 + t))
				if i%10 == 0 {
					mu.Lock()
					kept = append(kept, p)
					mu.Unlock()
				} else {
					C.free(p)
				}
			}
		}(t)
	}
	wg.Wait()
}

func main() {
	allocate()
	fmt.Println("allocated")
	switch os.Args[1] {
	case "exit":
		os.Exit(3)
	case "panic":
		panic("boom")
	case "goexit":
		done := make(chan bool)
		go func() {
			kept = append(kept, C.c_goroutine_alloc(555))
			os.Exit(4)
		}()
		<-done
	case "threads":
		threads()
	case "wait":
		os.WriteFile(os.Args[2], []byte("ready\n"), 0o644)
		time.Sleep(20 * time.Second)
	}
}
