/* list.h: the device-memory suite of `ninja check-gpu`. ZG_TEST(name, timeout_s) runs in a
 * forked process (exit 77: skipped, no usable GPU); ZG_RANK(name) is a rank program the tests
 * start under zcrun as `zcgputest --rank name`. run.sh reads the ZG_TEST names from here to
 * report them as skipped in builds without CUDA. */

/* tests/gpu/test_kernels.c */
ZG_TEST(gpu_reduce_kernels_match_host_bitwise_every_dtype_op, 300)
ZG_TEST(gpu_reduce_bandwidth_at_least_80_percent_of_device_memcpy, 120)

/* tests/gpu/test_colls.c */
ZG_TEST(gpu_registration_refuses_host_managed_partial_and_unregistered_memory, 60)
ZG_TEST(gpu_collectives_match_host_reference_1_rank, 300)
ZG_TEST(gpu_collectives_match_host_reference_2_ranks, 300)
ZG_TEST(gpu_collectives_match_host_reference_4_ranks, 300)
ZG_RANK(zg_rank_collectives)
ZG_TEST(gpu_stream_forms_captured_in_graph_replayed_100_times_2_ranks, 300)
ZG_TEST(gpu_stream_forms_captured_in_graph_replayed_100_times_4_ranks, 300)
ZG_RANK(zg_rank_stream_graph)
ZG_TEST(gpu_oneshot_allreduce_latency_8b_and_64kib_2_ranks, 120)
ZG_RANK(zg_rank_latency)
