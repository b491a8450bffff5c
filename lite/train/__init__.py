"""Training on device: `TrainSession` (train/eval a training `.ms`), `TrainLoop` with its callbacks, data sets."""
from lite.train.dataset import Dataset, load_mnist
from lite.train.loop import (RET_CONTINUE, RET_EXIT, RET_STOP_TRAINING, AccuracyMetrics,
                             ClassificationTrainAccuracyMonitor, CkptSaver, LossMonitor, LRScheduler, Metrics,
                             MultiplicativeLRLambda, StepLRLambda, TrainLoop, TrainLoopCallBack,
                             TrainLoopCallBackData)
from lite.train.session import MT_INFERENCE, MT_TRAIN, NonFiniteLossError, TrainSession
from lite.train.transfer import TransferSession, create_transfer_session

TrainSession.CreateTransferSession = staticmethod(create_transfer_session)    # MindSpore's static factory

__all__ = ["TrainSession", "TransferSession", "MT_TRAIN", "MT_INFERENCE", "NonFiniteLossError", "TrainLoop",
           "TrainLoopCallBack", "TrainLoopCallBackData", "LossMonitor", "ClassificationTrainAccuracyMonitor",
           "LRScheduler", "StepLRLambda", "MultiplicativeLRLambda", "CkptSaver", "Metrics", "AccuracyMetrics",
           "RET_CONTINUE", "RET_STOP_TRAINING", "RET_EXIT", "Dataset", "load_mnist"]
