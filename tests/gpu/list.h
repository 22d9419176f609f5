/* list.h: the device-memory suite (build/zcgputest): on the simulated device in `ninja check`
 * (tests/check.sh), on CUDA in `ninja check-gpu`. ZT_TEST(name, timeout_s) runs in a forked
 * process (exit 77: skipped, e.g. no usable GPU, or a test of one device kind only);
 * ZT_RANK(name) is a rank program the tests start under zcrun as `zcgputest --rank name`. */

/* tests/gpu/test_kernels.c */
ZT_TEST(gpu_reduce_kernels_match_host_bitwise_every_dtype_op, 300)
ZT_TEST(gpu_reduce_bandwidth_at_least_80_percent_of_device_memcpy, 120)
ZT_TEST(gpu_sim_defers_work_until_queried_and_runs_it_in_order, 60)
ZT_TEST(gpu_sim_eager_knob_runs_work_at_the_call, 60)
ZT_TEST(gpu_sim_fault_knob_fails_the_nth_operation_sticky, 60)
ZT_TEST(gpu_sim_memory_kinds_ipc_and_dmabuf, 60)

/* tests/gpu/test_colls.c */
ZT_TEST(gpu_registration_refuses_host_managed_partial_and_unregistered_memory, 60)
ZT_TEST(gpu_collectives_match_host_reference_1_rank, 300)
ZT_TEST(gpu_collectives_match_host_reference_2_ranks, 300)
ZT_TEST(gpu_collectives_match_host_reference_4_ranks, 300)
ZT_RANK(zg_rank_collectives)
ZT_TEST(gpu_stream_forms_in_order_on_a_stream_100_rounds_2_ranks, 300)
ZT_TEST(gpu_stream_forms_in_order_on_a_stream_100_rounds_4_ranks, 300)
ZT_RANK(zg_rank_stream_forms)
ZT_TEST(gpu_injected_device_fault_fails_every_rank_with_a_sentence_2_ranks, 120)
ZT_TEST(gpu_injected_device_fault_fails_every_rank_with_a_sentence_4_ranks, 120)
ZT_RANK(zg_rank_fault)
ZT_TEST(gpu_stream_calls_finish_on_their_stream_through_a_device_fault_3_ranks, 120)
ZT_RANK(zg_rank_stream_fault)
ZT_TEST(gpu_dead_peer_fails_device_allreduce_with_peer_lost_2_ranks, 120)
ZT_TEST(gpu_stalled_peer_times_device_allreduce_out_2_ranks, 120)
ZT_RANK(zg_rank_peer_trouble)
ZT_TEST(gpu_registration_order_mismatch_fails_both_ranks_2_ranks, 120)
ZT_RANK(zg_rank_register_mismatch)
ZT_TEST(gpu_staged_collectives_match_host_reference_2_ranks, 300)
ZT_TEST(gpu_staged_collectives_match_host_reference_3_ranks, 300)
ZT_TEST(gpu_staged_injected_device_fault_fails_every_rank_with_a_sentence_2_ranks, 120)
ZT_TEST(gpu_staged_dead_peer_fails_device_allreduce_with_peer_lost_2_ranks, 120)
ZT_RANK(zg_rank_must_fail)
ZT_RANK(zg_rank_path_choice)
ZT_RANK(zg_rank_split)
ZT_RANK(zg_rank_mixed)
ZT_RANK(zg_rank_mismatch)
ZT_TEST(gpu_oneshot_allreduce_latency_8b_and_64kib_2_ranks, 120)
ZT_RANK(zg_rank_latency)
