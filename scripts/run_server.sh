#!/usr/bin/env bash
# Start a local vLLM OpenAI-compatible server for SpeedRunner's `vllm` provider.
#
# Every choice has a default, an environment variable and a flag (flags win over env vars).
# Run `scripts/run_server.sh --help` for the list. Arguments after `--` go to `vllm serve`
# unchanged. The script prints the base_url to put in a config (model.base_url), then
# replaces itself with `vllm serve` (exec), so signals reach vLLM directly.
set -euo pipefail

MODEL="${SR_MODEL:-Qwen/Qwen3.5-35B-A3B}"
HOST="${SR_HOST:-127.0.0.1}"
PORT="${SR_PORT:-5012}"
SERVED_NAME="${SR_SERVED_NAME:-}"
MAX_MODEL_LEN="${SR_MAX_MODEL_LEN:-32768}"
TP="${SR_TENSOR_PARALLEL_SIZE:-1}"
DP="${SR_DATA_PARALLEL_SIZE:-1}"
GPU_MEM="${SR_GPU_MEMORY_UTILIZATION:-0.90}"
PREFIX_CACHING="${SR_PREFIX_CACHING:-1}"
PROMPT_TOKENS_DETAILS="${SR_PROMPT_TOKENS_DETAILS:-1}"
REASONING_PARSER="${SR_REASONING_PARSER:-qwen3}"
TOOL_CALL_PARSER="${SR_TOOL_CALL_PARSER:-qwen3_coder}"
LANGUAGE_MODEL_ONLY="${SR_LANGUAGE_MODEL_ONLY:-1}"
GENERATION_CONFIG="${SR_GENERATION_CONFIG:-vllm}"
VLLM_BIN="${SR_VLLM_BIN:-vllm}"
REPLICAS="${SR_REPLICAS:-1}"
DRY_RUN=0
EXTRA=()

usage() {
  cat <<USAGE
Usage: scripts/run_server.sh [options] [-- extra vllm serve args]

Starts 'vllm serve' (OpenAI-compatible API) and prints the base_url for configs.

Options (environment variable in brackets; flags win):
  --model NAME                  model to serve [SR_MODEL] (default: Qwen/Qwen3.5-35B-A3B)
  --host HOST                   bind address [SR_HOST] (default: 127.0.0.1, loopback only)
  --port PORT                   port [SR_PORT] (default: 5012)
  --served-model-name NAME      name clients use as model.name [SR_SERVED_NAME] (default: the model)
  --max-model-len N             context length [SR_MAX_MODEL_LEN] (default: 32768)
  --tensor-parallel-size N      GPUs per replica [SR_TENSOR_PARALLEL_SIZE] (default: 1)
  --data-parallel-size N        replicas behind this port [SR_DATA_PARALLEL_SIZE] (default: 1)
  --gpu-memory-utilization F    fraction of GPU memory vLLM may use [SR_GPU_MEMORY_UTILIZATION] (default: 0.90)
  --prefix-caching | --no-prefix-caching
                                automatic prefix caching [SR_PREFIX_CACHING=1|0] (default: on)
  --prompt-tokens-details | --no-prompt-tokens-details
                                report usage.prompt_tokens_details.cached_tokens (SpeedRunner's
                                cost accounting needs cached-token counts)
                                [SR_PROMPT_TOKENS_DETAILS=1|0] (default: on)
  --reasoning-parser NAME       reasoning parser, 'none' to disable [SR_REASONING_PARSER] (default: qwen3)
  --tool-call-parser NAME       native tool calls (model.tool_protocol: native): adds
                                --enable-auto-tool-choice and this parser; Qwen3.5 writes the
                                XML tool-call format that 'qwen3_coder' reads; 'none' to disable
                                [SR_TOOL_CALL_PARSER] (default: qwen3_coder)
  --language-model-only | --no-language-model-only
                                skip the vision tower [SR_LANGUAGE_MODEL_ONLY=1|0] (default: on)
  --generation-config SRC       'vllm' = vLLM's sampling defaults, 'auto' = the model's own
                                [SR_GENERATION_CONFIG] (default: vllm; SpeedRunner sends all
                                sampling parameters explicitly anyway)
  --vllm-bin PATH               the vllm executable [SR_VLLM_BIN] (default: vllm)
  --replicas N                  N independent servers on ports PORT..PORT+N-1, replica i on
                                GPUs i*TP..i*TP+TP-1 (CUDA_VISIBLE_DEVICES); prints the base_url
                                list to paste into model.base_url; stops them all on Ctrl-C
                                [SR_REPLICAS] (default: 1)
  --dry-run                     print the command instead of running it
  -h, --help                    this help

Config to use with it (enable_thinking is optional; Qwen3.5 thinks by default):
  model: {provider: vllm, name: <served name>, base_url: http://127.0.0.1:5012/v1}
USAGE
}

need_value() {
  if [[ $# -lt 2 || -z "$2" ]]; then
    echo "run_server.sh: option $1 needs a value (see --help)" >&2
    exit 2
  fi
}

while [[ $# -gt 0 ]]; do
  case "$1" in
    --model) need_value "$@"; MODEL="$2"; shift 2 ;;
    --host) need_value "$@"; HOST="$2"; shift 2 ;;
    --port) need_value "$@"; PORT="$2"; shift 2 ;;
    --served-model-name) need_value "$@"; SERVED_NAME="$2"; shift 2 ;;
    --max-model-len) need_value "$@"; MAX_MODEL_LEN="$2"; shift 2 ;;
    --tensor-parallel-size) need_value "$@"; TP="$2"; shift 2 ;;
    --data-parallel-size) need_value "$@"; DP="$2"; shift 2 ;;
    --gpu-memory-utilization) need_value "$@"; GPU_MEM="$2"; shift 2 ;;
    --prefix-caching) PREFIX_CACHING=1; shift ;;
    --no-prefix-caching) PREFIX_CACHING=0; shift ;;
    --prompt-tokens-details) PROMPT_TOKENS_DETAILS=1; shift ;;
    --no-prompt-tokens-details) PROMPT_TOKENS_DETAILS=0; shift ;;
    --reasoning-parser) need_value "$@"; REASONING_PARSER="$2"; shift 2 ;;
    --tool-call-parser) need_value "$@"; TOOL_CALL_PARSER="$2"; shift 2 ;;
    --language-model-only) LANGUAGE_MODEL_ONLY=1; shift ;;
    --no-language-model-only) LANGUAGE_MODEL_ONLY=0; shift ;;
    --generation-config) need_value "$@"; GENERATION_CONFIG="$2"; shift 2 ;;
    --vllm-bin) need_value "$@"; VLLM_BIN="$2"; shift 2 ;;
    --replicas) need_value "$@"; REPLICAS="$2"; shift 2 ;;
    --dry-run) DRY_RUN=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "run_server.sh: unknown option '$1' (see --help; pass vllm's own flags after --)" >&2; exit 2 ;;
  esac
done

if ! [[ "$PORT" =~ ^[0-9]+$ ]]; then
  echo "run_server.sh: port must be a number, got '$PORT'" >&2
  exit 2
fi
if ! [[ "$REPLICAS" =~ ^[1-9][0-9]*$ ]]; then
  echo "run_server.sh: --replicas must be a positive number, got '$REPLICAS'" >&2
  exit 2
fi
SERVED_NAME="${SERVED_NAME:-$MODEL}"

CMD=("$VLLM_BIN" serve "$MODEL"
  --host "$HOST"
  --port "$PORT"
  --served-model-name "$SERVED_NAME"
  --max-model-len "$MAX_MODEL_LEN"
  --tensor-parallel-size "$TP"
  --data-parallel-size "$DP"
  --gpu-memory-utilization "$GPU_MEM"
  --generation-config "$GENERATION_CONFIG")
if [[ "$PREFIX_CACHING" == 1 ]]; then CMD+=(--enable-prefix-caching); else CMD+=(--no-enable-prefix-caching); fi
if [[ "$PROMPT_TOKENS_DETAILS" == 1 ]]; then CMD+=(--enable-prompt-tokens-details); fi
if [[ "$REASONING_PARSER" != none && -n "$REASONING_PARSER" ]]; then CMD+=(--reasoning-parser "$REASONING_PARSER"); fi
if [[ "$TOOL_CALL_PARSER" != none && -n "$TOOL_CALL_PARSER" ]]; then
  CMD+=(--enable-auto-tool-choice --tool-call-parser "$TOOL_CALL_PARSER")
fi
if [[ "$LANGUAGE_MODEL_ONLY" == 1 ]]; then CMD+=(--language-model-only); fi
CMD+=("${EXTRA[@]}")

CLIENT_HOST="$HOST"
if [[ "$HOST" == 0.0.0.0 || "$HOST" == "::" ]]; then CLIENT_HOST=127.0.0.1; fi
BANNER="base_url: http://${CLIENT_HOST}:${PORT}/v1   (model.name: ${SERVED_NAME})"

if [[ "$REPLICAS" -gt 1 ]]; then
  # N servers, one per GPU group, each its own process: SpeedRunner spreads calls over them
  # (model.base_url as a list), holds max_concurrency per replica and skips a dead one.
  echo "model.base_url for ${REPLICAS} replicas (model.name: ${SERVED_NAME}):"
  for ((i = 0; i < REPLICAS; i++)); do echo "  - http://${CLIENT_HOST}:$((PORT + i))/v1"; done
  replica_cmd() {  # the command of replica $1
    local i="$1" port=$((PORT + $1)) c=("${CMD[@]}") j
    for j in "${!c[@]}"; do if [[ "${c[$j]}" == --port ]]; then c[$((j + 1))]="$port"; fi; done
    printf '%q ' "${c[@]}"
  }
  gpus() {  # CUDA_VISIBLE_DEVICES of replica $1
    local first=$(( $1 * TP )) list="" k
    for ((k = first; k < first + TP; k++)); do list+="${list:+,}$k"; done
    echo "$list"
  }
  if [[ "$DRY_RUN" == 1 ]]; then
    for ((i = 0; i < REPLICAS; i++)); do echo "CUDA_VISIBLE_DEVICES=$(gpus "$i") $(replica_cmd "$i")"; done
    exit 0
  fi
  if ! command -v "$VLLM_BIN" >/dev/null 2>&1; then
    echo "run_server.sh: '$VLLM_BIN' not found: vLLM is not installed in this environment." >&2
    exit 127
  fi
  PIDS=()
  trap 'kill "${PIDS[@]}" 2>/dev/null; wait' INT TERM EXIT
  for ((i = 0; i < REPLICAS; i++)); do
    eval "CUDA_VISIBLE_DEVICES=$(gpus "$i") $(replica_cmd "$i") &"
    PIDS+=($!)
  done
  wait -n "${PIDS[@]}"  # one replica ended: say so, stop the rest
  echo "run_server.sh: a replica exited; stopping the others" >&2
  exit 1
fi

if [[ "$DRY_RUN" == 1 ]]; then
  echo "$BANNER"
  printf '%q ' "${CMD[@]}"; echo
  exit 0
fi
if ! command -v "$VLLM_BIN" >/dev/null 2>&1; then
  echo "run_server.sh: '$VLLM_BIN' not found: vLLM is not installed in this environment." >&2
  echo "  Install it (needs a CUDA GPU): pip install -e '.[vllm]'  — or point --vllm-bin / SR_VLLM_BIN at it." >&2
  echo "  Without a GPU, use provider 'openai' or 'gemini' (API keys), or 'scripted' (offline)." >&2
  exit 127
fi
echo "$BANNER"
exec "${CMD[@]}"
