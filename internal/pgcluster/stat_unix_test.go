//go:build unix

package pgcluster

import (
	"os"
	"strconv"
	"syscall"
)

func statUID(st os.FileInfo) uint32 { return st.Sys().(*syscall.Stat_t).Uid }

func itoa(i int) string { return strconv.Itoa(i) }
