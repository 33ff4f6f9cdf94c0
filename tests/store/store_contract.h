/*
 * store_contract.h - the behaviour every store owes a cache, as one suite
 * that runs over any tier: progcache's memory, file and Redis tiers, and
 * one of your own (examples/README.md, "Testing your tier").
 *
 * It uses the public headers alone (progcache/sys/store.h), so a tier's
 * author can build store_contract.c with their tier and call
 * store_contract_run from their own test program.
 */
#ifndef PROGCACHE_STORE_CONTRACT_H
#define PROGCACHE_STORE_CONTRACT_H

#include <progcache/progcache.h>
#include <progcache/sys/store.h>

#ifdef __cplusplus
extern "C" {
#endif

/*
 * store_contract_run() : run the contract over the tier factory makes.
 * factory is called as progcache_open would call it (progcache/sys/store.h),
 * with url and ctx as given and params whose max_artifact_size is the
 * bound the tier must keep; each test asks for a new store and clears it
 * first, so the stores it makes may share one backing place (a directory,
 * a server), but nothing else may use that place meanwhile.
 * What is checked: a get returns the exact bytes put under that key or a
 * miss (PROGCACHE_ENOTFOUND, no message), never another key's or part of
 * them; overwrite, remove, clear, count, total_size; metadata and records
 * (when the store keeps them: get_meta); its flags; max_artifact_size;
 * exists and foreach (when offered) agreeing with get; several threads at
 * once on one store; a failure reported with a code and a message.
 * Prints one line per test to stdout, and the first failure to stderr.
 * @return 0 when every test passed; 1 (after the first failure).
 */
int store_contract_run(const char *label, progcache_store_factory factory, const char *url,
                       void *ctx);

#ifdef __cplusplus
}
#endif

#endif
