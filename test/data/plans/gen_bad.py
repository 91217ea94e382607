#!/usr/bin/env python3
# SPDX-License-Identifier: MIT
# Writes bad/: invalid plans with exactly ONE defect each, made by mutating a valid plan of
# good/ (see gen_good.py), plus bad/expected_errors.txt: "<file>\t<substring of the error>".
# The substring always includes the JSON path. Stdlib only.
import copy, json, os

HERE = os.path.dirname(os.path.abspath(__file__))
sys_path = HERE
import sys
sys.path.insert(0, HERE)
import gen_good as G

OUT = os.path.join(HERE, "bad")
cases = []  # (name, text, expected)

def add(name, plan_or_text, expected):
    text = plan_or_text if isinstance(plan_or_text, str) else G.render(plan_or_text)
    cases.append((name + ".json", text, expected))

def base(fn=G.ar2_ll):
    # Through JSON, so ops shared between positions in the generator become independent.
    return json.loads(json.dumps(fn()))

def ops(p, g=0, b=0): return p["gpus"][g]["threadblocks"][b]["ops"]

# --- JSON and top level --------------------------------------------------------------------
add("not_json", '{"name": "x", ', "(root): invalid JSON")
add("root_array", "[]", "(root): expected an object at the top level")
add("deep_nesting", "[" * 100 + "]" * 100, "JSON nested deeper than 64 levels")
p = base(); del p["name"]; add("missing_name", p, "name: missing required field")
p = base(); p["collective"] = "allfoo"; add("unknown_collective", p, "collective: unknown collective 'allfoo'")
p = base(); p["protocol"] = "LL128"; add("unknown_protocol", p, "protocol: unknown protocol 'LL128'")
p = base(); del p["inplace"]; add("missing_inplace", p, "inplace: missing required field")
p = base(); p["inplace"] = "yes"; add("inplace_not_bool", p, "inplace: expected a boolean")
p = base(); p["foo"] = 1; add("unknown_top_field", p, "foo: unknown field")
p = base(); p["num_threads_per_block"] = 500; add("threads_not_warp_multiple", p, "num_threads_per_block: 500 is not a multiple of 32")
p = base(); p["num_threads_per_block"] = 2048; add("threads_too_many", p, "num_threads_per_block: value 2048 out of range [32, 1024]")
p = base(); p["buffer_alignment"] = 24; add("alignment_not_pow2", p, "buffer_alignment: 24 is not a power of two")
p = base(); p["buffer_alignment"] = 4; add("alignment_too_small_for_ll", p, "buffer_alignment: 4 is below the minimum of 8 for protocol LL")
p = base(); p["min_message_size"] = 100; p["max_message_size"] = 10; add("min_above_max", p, "min_message_size: min_message_size 100 > max_message_size 10")
p = base(); p["max_message_size"] = -1; add("negative_size", p, "max_message_size: expected a non-negative integer")
p = base(); p["priority"] = "high"; add("priority_not_int", p, "priority: expected an integer")
p = base(); p["nranks_per_node"] = 3; add("nranks_per_node_too_big", p, "gpus: lists 2 ranks, fewer than nranks_per_node (3)")
p = base(); p["nranks_per_node"] = 1; add("memory_channel_between_nodes", p, "gpus[0].channels: memory channel 0 connects rank 0 (node 0) to rank 1 (node 1): memory channels stay inside a node of 1 ranks")
p = base(); p["gpus"] = []; add("no_gpus", p, "gpus: a plan needs at least one gpu")
add("duplicate_key", G.render(base()).replace('"inplace": true', '"inplace": true, "inplace": true'),
    "inplace: duplicate field")

# --- gpus ----------------------------------------------------------------------------------
p = base(); p["gpus"][0]["id"], p["gpus"][1]["id"] = 1, 0; add("gpu_ids_swapped", p, "gpus[0].id: gpus[0].id is 1: gpus must be listed by rank")
p = base(); del p["gpus"][0]["input_chunks"]; add("missing_input_chunks", p, "gpus[0].input_chunks: missing required field")
p = base()
for g in p["gpus"]: g["output_chunks"] = 3
add("output_chunks_disagree", p, "gpus[0].output_chunks: 3 output chunks disagree with 2 input chunks")
p = base(); p["gpus"][1]["input_chunks"] = 4; p["gpus"][1]["output_chunks"] = 4
add("chunks_differ_between_ranks", p, "gpus[1].input_chunks: 4 input chunks but gpus[0] has 2")
p = base(G.ag4_ll)
for g in p["gpus"]: g["output_chunks"] = 2
add("allgather_chunks_disagree", p, "gpus[0].output_chunks: 2 output chunks disagree with 1 input chunks (allgather output is nranks x input")
p = base(); p["gpus"][0]["channels"][0]["connected_to"] = [5]; add("peer_out_of_range", p, "gpus[0].channels[0].connected_to[0]: peer must be a rank in [0, 2)")
p = base(); p["gpus"][0]["channels"][0]["connected_to"] = [0]; add("channel_to_self", p, "gpus[0].channels[0].connected_to[0]: a channel cannot connect rank 0 to itself")
p = base(); p["gpus"][0]["channels"][0]["connected_to"] = [1, 1]; add("unpaired_channel", p, "gpus[0].channels: memory channel 1 to rank 1 has no partner: rank 1 has 1 memory channel to rank 0")
p = base(); p["gpus"][0]["channels"][0]["channel_type"] = "carrier-pigeon"; add("unknown_channel_type", p, "gpus[0].channels[0].channel_type: unknown channel type 'carrier-pigeon'")
p = base(); p["gpus"][0]["remote_buffers"][0]["rank"] = 0; add("remote_buffer_on_self", p, "gpus[0].remote_buffers[0].rank: a remote buffer must belong to another rank")
p = base(); p["gpus"][0]["remote_buffers"][0]["type"] = "x"; add("remote_buffer_bad_type", p, "gpus[0].remote_buffers[0].type: unknown buffer type 'x'")
p = base(); p["gpus"][0]["remote_buffers"][0]["access_channel_types"] = ["memory", "port"]
add("remote_buffer_without_channel", p, "gpus[0].remote_buffers[0].access_channel_types: buffer of rank 1 is accessed through port channels but rank 0 has no port channel to rank 1")
p = base(); p["gpus"][0]["semaphores"] = [{"init_value": -1}]; add("semaphore_negative", p, "gpus[0].semaphores[0].init_value: expected a non-negative integer")

# --- threadblocks ---------------------------------------------------------------------------
p = base(); p["gpus"][0]["threadblocks"][0]["id"] = 5; add("threadblock_id_mismatch", p, "gpus[0].threadblocks[0].id: threadblock id 5 does not match its position 0")
p = base(); p["gpus"][0]["threadblocks"][0]["channels"][0]["channel_ids"] = [3]
add("block_channel_out_of_range", p, "gpus[0].threadblocks[0].channels[0].channel_ids[0]: memory channel 3 out of range [0, 1)")
p = base(); p["gpus"][0]["threadblocks"][0]["remote_buffer_refs"][0]["access_channel_type"] = "port"
add("block_ref_wrong_access", p, "gpus[0].threadblocks[0].remote_buffer_refs[0].remote_buffer_ids[0]: remote buffer 0 is not accessible through port channels")
p = base(); tb0 = p["gpus"][0]["threadblocks"][0]
p["gpus"][0]["threadblocks"] = [dict(copy.deepcopy(tb0), id=i) for i in range(133)]
add("too_many_threadblocks", p, "gpus[0].threadblocks: 133 threadblocks exceed the limit of 132")
p = base(); ops(p)[:] = [{"name": "nop"}] * 65; add("too_many_ops", p, "gpus[0].threadblocks[0].ops: 65 ops exceed the limit of 64")
p = base(G.ar2_pipeline_sem); ops(p, 0, 0)[2]["ops"] += [{"name": "nop"}] * 60
add("too_many_ops_with_pipeline", p, "gpus[0].threadblocks[0].ops: 69 ops (pipeline inner ops included) exceed the limit of 64")

# --- ops ------------------------------------------------------------------------------------
p = base(); ops(p)[0]["name"] = "frobnicate"; add("unknown_op", p, "gpus[0].threadblocks[0].ops[0].name: unknown op 'frobnicate'")
p = base(); ops(p)[0]["name"] = "glre"; add("glre_unfused", p, "gpus[0].threadblocks[0].ops[0].name: op 'glre' must be fused into 'glres'")
p = base(); ops(p)[0]["foo"] = 1; add("unknown_op_field", p, "gpus[0].threadblocks[0].ops[0].foo: unknown field")
p = base(); ops(p, 1)[0]["src_buff"][0]["index"] = 4
add("chunk_index_out_of_range", p, "gpus[1].threadblocks[0].ops[0].src_buff[0].index: chunk index 4 out of range [0, 2) of input buffer")
p = base(); ops(p)[0]["src_buff"][0].update(index=1, size=2)
ops(p)[0]["dst_buff"][0]["size"] = 2
add("chunk_range_overflow", p, "gpus[0].threadblocks[0].ops[0].src_buff[0].size: chunks [1, 3) exceed the 2 chunks of input buffer")
p = base(); ops(p)[0]["dst_buff"][0]["index"] = 5
add("remote_chunk_out_of_range", p, "gpus[0].threadblocks[0].ops[0].dst_buff[0].index: chunk index 5 out of range [0, 2) of remote scratch buffer")
p = base(); ops(p)[0]["dst_buff"][0]["buffer_id"] = 3
add("remote_slot_out_of_range", p, "gpus[0].threadblocks[0].ops[0].dst_buff[0].buffer_id: remote buffer slot 3 out of range [0, 1)")
p = base(); ops(p)[0]["src_buff"][0]["buffer_id"] = 0
add("ref_two_kinds", p, "gpus[0].threadblocks[0].ops[0].src_buff[0]: a buffer reference needs exactly one of type, buffer_id, switch_channel_id")
p = base(); ops(p)[2]["src_buff"][0]["size"] = 0
add("ref_size_zero", p, "gpus[0].threadblocks[0].ops[2].src_buff[0].size: value 0 out of range [1,")
p = base(); del ops(p)[0]["channel_type"]
add("remote_ref_without_channel_type", p, "gpus[0].threadblocks[0].ops[0].dst_buff[0].buffer_id: remote buffer reference on an op whose channel_type is none")
p = base()
for g in p["gpus"]: g["remote_buffers"][0]["type"] = "i"
add("put_packet_to_non_scratch", p, "gpus[0].threadblocks[0].ops[0].dst_buff[0]: op 'ppkt' needs a remote scratch buffer here (packets land in the peer's scratch), got input")
p = base(); ops(p)[2]["src_buff"][0] = G.L("i", 1)
add("unpack_from_non_scratch", p, "gpus[0].threadblocks[0].ops[2].src_buff[0]: op 'upkt' needs a scratch buffer here (packets are unpacked from scratch), got input")
p = base(); ops(p)[1]["src_buff"][1] = G.L("o", 1)
add("reduce_packets_from_non_scratch", p, "gpus[0].threadblocks[0].ops[1].src_buff[1]: op 'respkt' needs a scratch buffer here (peers' packets are read from scratch), got output")
p = base(G.ag2_port_ll); ops(p)[2]["src_buff"][0] = G.L("i", 0)
add("port_put_packet_from_non_scratch", p, "gpus[0].threadblocks[0].ops[2].src_buff[0]: op 'ppkt' needs a scratch buffer here (port put-packet sends packets from scratch), got input")
p = base(); ops(p)[0]["dst_buff"][0] = G.L("s", 0)
add("put_packet_to_local", p, "gpus[0].threadblocks[0].ops[0].dst_buff[0]: op 'ppkt' needs a remote buffer here")
p = base(); p["protocol"] = "Simple"
add("packet_op_in_simple_plan", p, "gpus[0].threadblocks[0].ops[0].name: packet op 'ppkt' needs protocol LL")
p = base(G.ar2_simple); ops(p, 1)[8]["name"] = "glres"
add("nvls_op", p, "gpus[1].threadblocks[0].ops[8].name: NVLS op 'glres' refused: NVLink multicast is disabled in planccl")
p = base(); p["gpus"][1]["channels"].append({"channel_type": "switch", "buffer_type": "i", "rank_groups": [{"size": 2, "ranks": [0, 1]}]})
add("switch_channel", p, "gpus[1].channels: switch channel refused: NVLink multicast is disabled in planccl")
p = base(G.ar2_simple); del ops(p)[0]["channel_ids"]
add("signal_without_channels", p, "gpus[0].threadblocks[0].ops[0].channel_ids: op 'signal' needs channel_ids")
p = base(G.ar2_simple); ops(p)[0]["channel_ids"] = [1]
add("op_channel_slot_out_of_range", p, "gpus[0].threadblocks[0].ops[0].channel_ids[0]: channel slot 1 out of range [0, 1) of the threadblock's memory channels")
p = base(G.ar2_simple); ops(p, 1)[:] = ops(p, 1)[:5] + ops(p, 1)[6:]
add("signal_wait_mismatch", p, "gpus[0].channels: signal/wait mismatch: rank 0 signals 3 times on memory channel 0 to rank 1, which waits 2 times on its channel 0")
p = base(G.ar2_pipeline_sem); ops(p, 1, 0)[2]["ops"].pop(3)
add("signal_wait_mismatch_in_pipeline", p, "gpus[0].channels: signal/wait mismatch: rank 0 signals 1 time on memory channel 0 to rank 1, which waits 0 times on its channel 0 per iteration of pipelines with num_chunks/unit_size = 1/4096")
p = base(G.ar2_simple); ops(p)[2]["name"] = "pws"
add("pws_on_memory_channel", p, "gpus[0].threadblocks[0].ops[2].channel_type: op 'pws' needs channel_type port, got memory")
p = base(G.ag2_port); del ops(p)[3]["channel_ids"]
add("port_put_without_channels", p, "gpus[0].threadblocks[0].ops[3].channel_ids: op 'pws' needs channel_ids")
# The kernel's proxy puts dst_buff[2 + j] for channel_ids[j] only: a remote dst without its own
# channel would never be sent.
p = base(G.ar2_port_recspkt); ops(p)[3]["dst_buff"].append(G.R(0, 3))
add("port_recspkt_remote_without_channel", p, "gpus[0].threadblocks[0].ops[3].channel_ids: port op 'recspkt' needs one channel per dst_buff entry from dst_buff[2] on (1 channels, 2 such dst)")
p = base(G.ar2_port_recspkt); ops(p)[3]["dst_buff"][1] = G.R(0, 2); ops(p)[3]["dst_buff"].pop()
add("port_recspkt_without_local_copy", p, "gpus[0].threadblocks[0].ops[3].dst_buff: op 'recspkt' needs at least 3 dst_buff entries, got 2")
p = base(G.ar2_port_recspkt); ops(p)[3]["dst_buff"][1] = G.R(0, 2)
add("port_recspkt_remote_copy", p, "gpus[0].threadblocks[0].ops[3].dst_buff[1]: op 'recspkt' needs a local buffer here (packet copy of the result), got a remote reference")
p = base(G.ar2_pipeline_sem); del ops(p, 0, 0)[2]["iter_context"]
add("pipeline_without_iter_context", p, "gpus[0].threadblocks[0].ops[2].iter_context: pipeline op needs iter_context")
p = base(G.ar2_pipeline_sem); ops(p, 0, 0)[2]["ops"].append(copy.deepcopy(ops(p, 0, 0)[2]))
add("nested_pipeline", p, "gpus[0].threadblocks[0].ops[2].ops[6].name: pipelines cannot be nested")
p = base(G.ar2_pipeline_sem); ops(p, 0, 0)[2]["iter_context"]["unit_size"] = 1000
add("unit_size_unaligned", p, "gpus[0].threadblocks[0].ops[2].iter_context.unit_size: unit_size 1000 is not a multiple of buffer_alignment 16")
p = base(G.ar2_pipeline_sem); ops(p, 0, 0)[2]["ops"][5]["semaphore_ids"] = [1]
add("semaphore_out_of_range", p, "gpus[0].threadblocks[0].ops[2].ops[5].semaphore_ids[0]: semaphore 1 out of range [0, 1)")
p = base(G.ar2_pipeline_sem); ops(p, 0, 1)[0]["ops"][0]["semaphore_ids"] = []
add("sem_acquire_without_ids", p, "gpus[0].threadblocks[1].ops[0].ops[0].semaphore_ids: op 'sem_acquire' needs semaphore_ids")
p = base(G.ar2_pipeline_sem); ops(p, 0, 0).insert(0, {"name": "barrier", "barrier_id": 0, "num_threadblocks": 2})
add("barrier_missing_block", p, "gpus[0].threadblocks: barrier 0 expects 2 threadblocks but 1 take part")
p = base(G.ar2_simple_barrier_tbg); del ops(p, 0, 1)[0]["num_threadblocks"]
add("barrier_without_count", p, "gpus[0].threadblocks[1].ops[0].num_threadblocks: barrier needs num_threadblocks")
p = base(G.ar2_simple_barrier_tbg); ops(p, 0, 1)[0]["barrier_id"] = 16
add("barrier_id_out_of_range", p, "gpus[0].threadblocks[1].ops[0].barrier_id: value 16 out of range [0, 15]")
p = base(G.ar2_simple_barrier_tbg); ops(p, 1, 0)[6]["tbg_info"]["tb_id"] = 2
add("tbg_id_out_of_range", p, "gpus[1].threadblocks[0].ops[6].tbg_info.tb_id: value 2 out of range [0, 1]")
p = base(G.ag4_ll); ops(p)[1]["dst_buff"][0]["size"] = 2
add("copy_sizes_differ", p, "gpus[0].threadblocks[0].ops[1].dst_buff[0].size: op 'copy' moves 2 chunks here but 1 elsewhere")
p = base(); ops(p)[1]["reduce_op"] = "xor"
add("unknown_reduce_op", p, "gpus[0].threadblocks[0].ops[1].reduce_op: unknown reduce_op 'xor'")
p = base(); ops(p)[2]["channel_type"] = "memory"; ops(p)[2]["channel_ids"] = [0]
add("channel_ids_on_local_op", p, "gpus[0].threadblocks[0].ops[2].channel_ids: op 'upkt' takes no channel_ids")
p = base(); ops(p)[2]["dst_buff"].append(G.L("i", 0))
add("too_many_dst", p, "gpus[0].threadblocks[0].ops[2].dst_buff: op 'upkt' needs exactly 1 dst_buff entry, got 2")
p = base(G.ar2_simple); ops(p)[0]["src_buff"] = [G.L("i", 0)]
add("buffers_on_signal", p, "gpus[0].threadblocks[0].ops[0].src_buff: op 'signal' takes no src_buff")
p = base(G.ar2_simple); ops(p)[7]["dst_buff"] = ops(p)[7]["dst_buff"][:1]
add("reduce_send_without_remote", p, "gpus[0].threadblocks[0].ops[7].dst_buff: op 'res' needs at least 2 dst_buff entries, got 1")

def wanted():
    """Every file this script writes, name -> text."""
    files = {"expected_errors.txt": "# <file>\\t<substring the loader's error must contain (JSON path included)>\n"
             + "".join(f"{name}\t{expected}\n" for name, text, expected in cases)}
    for name, text, _ in cases:
        files[name] = text if text.endswith("\n") else text + "\n"
    return files


if __name__ == "__main__":
    files = wanted()
    if "--check" in sys.argv[1:]:
        # CI: bad/ is exactly what this script writes (a hand edit of a plan or of the expected
        # errors would drift from the script otherwise).
        have = {f for f in os.listdir(OUT) if f.endswith(".json") or f == "expected_errors.txt"}
        stale = sorted(n for n, t in files.items()
                       if n not in have or open(os.path.join(OUT, n)).read() != t)
        stale += sorted(have - set(files))
        for n in stale:
            print(f"test/data/plans/bad/{n}: differs from gen_bad.py (run it to regenerate)")
        sys.exit(1 if stale else 0)
    os.makedirs(OUT, exist_ok=True)
    for f in os.listdir(OUT):
        if f.endswith(".json"):
            os.remove(os.path.join(OUT, f))
    for name, text in files.items():
        with open(os.path.join(OUT, name), "w") as f:
            f.write(text)
    print(len(cases), "bad plans")
