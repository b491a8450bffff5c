package com.mindspore.lite;

/**
 * A MindSpore Lite failure: {@link #getStatus()} is the MindSpore Lite status code (one of the {@code RET_*}
 * constants), the message names the tensor, node, op or file and ends with MindSpore's text for the code.
 * Unchecked: methods that return {@code boolean} in MindSpore Lite's Java API return {@code true} or throw this.
 */
public class LiteException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    public static final int RET_OK = 0;
    public static final int RET_ERROR = -1;
    public static final int RET_NULL_PTR = -2;
    public static final int RET_PARAM_INVALID = -3;
    public static final int RET_NO_CHANGE = -4;
    public static final int RET_SUCCESS_EXIT = -5;
    public static final int RET_MEMORY_FAILED = -6;
    public static final int RET_NOT_SUPPORT = -7;
    public static final int RET_THREAD_POOL_ERROR = -8;
    public static final int RET_OUT_OF_TENSOR_RANGE = -100;
    public static final int RET_INPUT_TENSOR_ERROR = -101;
    public static final int RET_REENTRANT_ERROR = -102;
    public static final int RET_GRAPH_FILE_ERR = -200;
    public static final int RET_NOT_FIND_OP = -300;
    public static final int RET_INVALID_OP_NAME = -301;
    public static final int RET_INVALID_OP_ATTR = -302;
    public static final int RET_OP_EXECUTE_FAILURE = -303;
    public static final int RET_FORMAT_ERR = -400;
    public static final int RET_INFER_ERR = -500;
    public static final int RET_INFER_INVALID = -501;
    public static final int RET_INPUT_PARAM_INVALID = -600;

    private final int status;

    public LiteException(int status, String message) {
        super(message);
        this.status = status;
    }

    /** The MindSpore Lite status code. */
    public int getStatus() {
        return status;
    }
}
