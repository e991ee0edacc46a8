package main

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/weft-dev/weft/client"
	"github.com/weft-dev/weft/kv"
)

// errKVNotFound and errKVCASFailed make `weft kv` exit non-zero.
var (
	errKVNotFound  = errors.New("not found")
	errKVCASFailed = errors.New("compare-and-set failed")
	errKVAborted   = errors.New("transaction aborted")
)

func kvCmd() *cobra.Command {
	var (
		cf      clientFlags
		timeout time.Duration
		absent  bool
	)
	root := &cobra.Command{
		Use:   "kv get|put|del|cas|txn (--config FILE | --peers ... --groups ...) KEY [VALUE...]",
		Short: "Read and write weft-kv, the key-value store of agents run with service = \"kv\"",
		Long: `Operate on weft-kv, the reference replicated service: every group of the
cluster is a shard, and key K lives on shard FNV-1a-64(K) mod (number of
groups). Each operation is multicast to its key's shard and answered by its
state machine; reads go through the order too, so every operation is
linearizable (docs/rsm.md). Keys are 1 to 1024 bytes, values at most
262144 bytes.

The agents must run with service = "kv" in their configuration; the
cluster layout and credentials come from --config (an agent's file) or
--peers and --groups, as for weft multicast.

A transaction (txn) runs conditions, reads and writes on any keys, across
shards, atomically: every write or none, at one point of the global order.

Exit status: 0 on success; 1 when get or del finds no key, when a
compare-and-set fails (the current value is printed), when a transaction
aborts, or on an error.`,
		Example: `  weft kv put --config node0.toml color blue
  weft kv get --config node0.toml color
  weft kv cas --config node0.toml color blue green
  weft kv cas --config node0.toml --absent fresh 1
  weft kv del --config node0.toml color
  weft kv txn --config node0.toml 'if alice >= 10' 'add alice -10' 'add bob 10' 'read alice'`,
	}
	cf.register(root.PersistentFlags())
	root.PersistentFlags().DurationVar(&timeout, "timeout", 10*time.Second, "give up after this long")

	run := func(cmd *cobra.Command, f func(ctx context.Context, k *kv.Client) error) error {
		ccfg, err := cf.config(cmd)
		if err != nil {
			return err
		}
		k, cl, err := newKVClient(ccfg)
		if err != nil {
			return err
		}
		defer cl.Close()
		ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
		defer cancel()
		err = f(ctx, k)
		if errors.Is(err, context.DeadlineExceeded) {
			return fmt.Errorf("no reply within %v (a write may still take effect; are the agents running with service = \"kv\"?)%s", timeout, dialTrouble(cl.TransportStats()))
		}
		return err
	}
	out := func(cmd *cobra.Command, format string, args ...any) { fmt.Fprintf(cmd.OutOrStdout(), format, args...) }

	var consistency string
	get := &cobra.Command{
		Use: "get KEY", Short: "Print KEY's value", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			level, err := kv.ParseConsistency(consistency)
			if err != nil {
				return err
			}
			return run(cmd, func(ctx context.Context, k *kv.Client) error {
				v, ok, err := k.Get(ctx, args[0], level)
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("%q: %w", args[0], errKVNotFound)
				}
				out(cmd, "%s\n", v)
				return nil
			})
		},
	}
	get.Flags().StringVar(&consistency, "consistency", "linearizable",
		"linearizable (through the shard leader's read index), ordered (a multicast, like a write) or local (any replica's state, possibly stale; docs/reads.md)")
	root.AddCommand(get, &cobra.Command{
		Use: "put KEY VALUE", Short: "Set KEY to VALUE", Args: cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, func(ctx context.Context, k *kv.Client) error {
				if err := k.Put(ctx, args[0], []byte(args[1])); err != nil {
					return err
				}
				out(cmd, "OK\n")
				return nil
			})
		},
	}, &cobra.Command{
		Use: "del KEY", Short: "Delete KEY", Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, func(ctx context.Context, k *kv.Client) error {
				ok, err := k.Delete(ctx, args[0])
				if err != nil {
					return err
				}
				if !ok {
					return fmt.Errorf("%q: %w", args[0], errKVNotFound)
				}
				out(cmd, "deleted\n")
				return nil
			})
		},
	})
	cas := &cobra.Command{
		Use:   "cas KEY OLD NEW | cas --absent KEY NEW",
		Short: "Set KEY to NEW if its value is OLD (or, with --absent, if it does not exist)",
		Args: func(cmd *cobra.Command, args []string) error {
			if absent {
				return cobra.ExactArgs(2)(cmd, args)
			}
			return cobra.ExactArgs(3)(cmd, args)
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			return run(cmd, func(ctx context.Context, k *kv.Client) error {
				var expect []byte // nil: must be absent
				if !absent {
					expect = []byte(args[1])
				}
				ok, cur, present, err := k.CompareAndSet(ctx, args[0], expect, []byte(args[len(args)-1]))
				switch {
				case err != nil:
					return err
				case ok:
					out(cmd, "OK\n")
					return nil
				case present:
					return fmt.Errorf("%w: %q is %q", errKVCASFailed, args[0], cur)
				}
				return fmt.Errorf("%w: %q does not exist", errKVCASFailed, args[0])
			})
		},
	}
	cas.Flags().BoolVar(&absent, "absent", false, "set only if KEY does not exist")
	root.AddCommand(cas, kvTxnCmd(run, out))
	return root
}

// kvTxnCmd is `weft kv txn CLAUSE...` (kv.ParseTxn's clauses).
func kvTxnCmd(run func(*cobra.Command, func(context.Context, *kv.Client) error) error, out func(*cobra.Command, string, ...any)) *cobra.Command {
	return &cobra.Command{
		Use:   "txn CLAUSE...",
		Short: "Run a transaction: conditions, reads and writes on keys of any shards, all or nothing",
		Long: `Run a one-shot transaction. Each argument is one clause:

  if KEY = VALUE     the key holds VALUE        read KEY      print its value (before the writes)
  if KEY absent      the key does not exist     put KEY VALUE set it
  if KEY present     the key exists             del KEY       delete it
  if KEY >= N        its integer value >= N     add KEY N     add N to its integer value

Absent keys count as 0 for >= and add. If every condition holds (and every
add applies to an integer), every write is applied, at every shard involved;
otherwise none is and the command exits 1 naming what failed. The shards
exchange their conditions' outcomes (docs/kv.md).`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			t, err := kv.ParseTxn(args)
			if err != nil {
				return err
			}
			return run(cmd, func(ctx context.Context, k *kv.Client) error {
				res, err := k.Txn(ctx, t)
				if err != nil && !errors.Is(err, kv.ErrTxnTooLarge) {
					return err
				}
				for i, key := range t.Reads {
					if i < len(res.Reads) && res.Reads[i].Present {
						out(cmd, "%s = %s\n", key, res.Reads[i].Value)
					} else if err == nil {
						out(cmd, "%s (absent)\n", key)
					}
				}
				if err != nil {
					return err
				}
				if res.Committed {
					out(cmd, "committed at %s\n", res.GTS)
					return nil
				}
				var why []string
				for _, i := range res.Failed {
					why = append(why, fmt.Sprintf("%q does not hold", clause(args, i, "if")))
				}
				for _, i := range res.BadWrites {
					why = append(why, fmt.Sprintf("%q: the value is not an integer or the sum overflows", clause(args, i, "put", "del", "add")))
				}
				return fmt.Errorf("%w at %s: %s", errKVAborted, res.GTS, strings.Join(why, "; "))
			})
		},
	}
}

// clause returns the n-th clause (from 0) whose first word is one of
// words: ParseTxn keeps the clauses of each kind in their order.
func clause(args []string, n int, words ...string) string {
	for _, a := range args {
		if f := strings.Fields(a); len(f) > 0 && slices.Contains(words, f[0]) {
			if n == 0 {
				return a
			}
			n--
		}
	}
	return "?"
}

// newKVClient returns a kv client over a new client of ccfg's cluster,
// whose groups are the shards; close the client.Client when done.
func newKVClient(ccfg client.Config) (*kv.Client, *client.Client, error) {
	ccfg.AllGroups = true // a kv node answers from every destination group
	cl, err := client.New(ccfg)
	if err != nil {
		return nil, nil, err
	}
	k, err := kv.NewClient(cl, ccfg.Topology.NumGroups())
	if err != nil {
		cl.Close()
		return nil, nil, err
	}
	return k, cl, nil
}
