/*
 * gpuval MPI preflight: before any long benchmark, prove that every rank starts, that every
 * rank can exchange data with every other (an all-to-all opens a connection between each
 * pair), and that a tiny allreduce gives the right sum. Timeouts are the launcher's job.
 *
 * Build: mpicc -O2 -o mpi_preflight mpi_preflight.c
 * Run:   mpirun --hostfile HOSTS -np N ./mpi_preflight
 *
 * Output (parsed by gpuval.parsers.gpuval_bench, tool "mpi-preflight"):
 *   every rank:  gpuval-mpi-preflight rank R/N host H
 *   rank 0:      gpuval-mpi-preflight library <MPI_Get_library_version, first line>
 *                gpuval-mpi-preflight alltoall pairs P bad B
 *                gpuval-mpi-preflight allreduce sum S expected E
 *                gpuval-mpi-preflight FAILED rank R host H: <what>   (one per problem)
 *                gpuval-mpi-preflight OK <N> ranks on <M> hosts  |  gpuval-mpi-preflight FAILED: <n> problem(s)
 * Exit status 0 when OK, 1 otherwise. Errors are returned (MPI_ERRORS_RETURN), not fatal, so
 * rank 0 can still say which rank and host failed.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PREFIX "gpuval-mpi-preflight"

static const char *host_of(const char *hosts, int rank) {
    const char *name = hosts + (size_t)rank * MPI_MAX_PROCESSOR_NAME;
    return name[0] ? name : "(no answer)";
}

static int distinct_hosts(const char *hosts, int size) {
    int count = 0;
    for (int i = 0; i < size; i++) {
        int seen = 0;
        for (int j = 0; j < i && !seen; j++)
            seen = strcmp(host_of(hosts, i), host_of(hosts, j)) == 0;
        count += !seen;
    }
    return count;
}

int main(int argc, char **argv) {
    int rank = 0, size = 0, length = 0, problems = 0;
    MPI_Init(&argc, &argv);
    MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    char host[MPI_MAX_PROCESSOR_NAME];
    memset(host, 0, sizeof host);
    MPI_Get_processor_name(host, &length);
    printf(PREFIX " rank %d/%d host %s\n", rank, size, host);
    fflush(stdout);

    /* Every rank's host name; a slot left empty is a rank that did not answer. */
    char *hosts = calloc((size_t)size, MPI_MAX_PROCESSOR_NAME);
    int gathered = MPI_Allgather(host, MPI_MAX_PROCESSOR_NAME, MPI_CHAR, hosts,
                                 MPI_MAX_PROCESSOR_NAME, MPI_CHAR, MPI_COMM_WORLD);

    /* All-to-all of rank numbers: sent[j] = my rank; received[j] must be j. */
    int *sent = malloc(sizeof(int) * (size_t)size);
    int *received = malloc(sizeof(int) * (size_t)size);
    for (int j = 0; j < size; j++) {
        sent[j] = rank;
        received[j] = -1;
    }
    int exchanged = MPI_Alltoall(sent, 1, MPI_INT, received, 1, MPI_INT, MPI_COMM_WORLD);
    /* missing[j] = 1: this rank got nothing (or garbage) from rank j. */
    int *missing = malloc(sizeof(int) * (size_t)size);
    for (int j = 0; j < size; j++)
        missing[j] = exchanged != MPI_SUCCESS || received[j] != j;
    int *all_missing = rank == 0 ? malloc(sizeof(int) * (size_t)size * (size_t)size) : NULL;
    int collected =
        MPI_Gather(missing, size, MPI_INT, all_missing, size, MPI_INT, 0, MPI_COMM_WORLD);

    long long value = rank + 1, sum = 0;
    long long expected = (long long)size * (size + 1) / 2;
    int reduced = MPI_Allreduce(&value, &sum, 1, MPI_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);

    if (rank == 0) {
        char library[MPI_MAX_LIBRARY_VERSION_STRING];
        int library_length = 0;
        MPI_Get_library_version(library, &library_length);
        library[strcspn(library, "\r\n")] = '\0';
        printf(PREFIX " library %s\n", library);

        if (gathered != MPI_SUCCESS) {
            printf(PREFIX " FAILED rank 0 host %s: host name exchange (MPI_Allgather) failed\n",
                   host);
            problems++;
        }
        for (int i = 0; i < size; i++) {
            if (!hosts[(size_t)i * MPI_MAX_PROCESSOR_NAME]) {
                printf(PREFIX " FAILED rank %d host %s: did not answer the host name exchange\n",
                       i, host_of(hosts, i));
                problems++;
            }
        }
        int pairs = 0, bad = 0;
        if (collected != MPI_SUCCESS) {
            printf(PREFIX " FAILED rank 0 host %s: could not collect the all-to-all results\n",
                   host);
            problems++;
        } else {
            for (int i = 0; i < size; i++) {
                for (int j = 0; j < size; j++) {
                    if (i == j) continue;
                    pairs++;
                    if (all_missing[(size_t)i * (size_t)size + (size_t)j]) {
                        bad++;
                        printf(PREFIX " FAILED rank %d host %s: received nothing from rank %d "
                                      "host %s in the all-to-all\n",
                               i, host_of(hosts, i), j, host_of(hosts, j));
                    }
                }
            }
        }
        problems += bad;
        printf(PREFIX " alltoall pairs %d bad %d\n", pairs, bad);
        printf(PREFIX " allreduce sum %lld expected %lld\n", reduced == MPI_SUCCESS ? sum : -1,
               expected);
        if (reduced != MPI_SUCCESS || sum != expected) {
            printf(PREFIX " FAILED rank 0 host %s: allreduce gave %lld, expected %lld\n", host,
                   reduced == MPI_SUCCESS ? sum : -1, expected);
            problems++;
        }
        if (problems)
            printf(PREFIX " FAILED: %d problem(s)\n", problems);
        else
            printf(PREFIX " OK %d ranks on %d hosts\n", size, distinct_hosts(hosts, size));
        fflush(stdout);
    }
    MPI_Bcast(&problems, 1, MPI_INT, 0, MPI_COMM_WORLD);
    free(all_missing);
    free(missing);
    free(received);
    free(sent);
    free(hosts);
    MPI_Finalize();
    return problems ? 1 : 0;
}
